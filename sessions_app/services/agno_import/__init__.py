"""Importing an Agno database (its sessions table, 2.x or 1.x) into Parley."""

from sessions_app.services.agno_import.importer import import_agno
from sessions_app.services.agno_import.report import Report
from sessions_app.services.agno_import.source import SourceError
from sessions_app.services.agno_import.store import UserMapping, username_problem

__all__ = ["Report", "SourceError", "UserMapping", "import_agno", "username_problem"]
