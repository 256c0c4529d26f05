"""Importing an Agno database (its sessions table, 2.x or 1.x) into Parley.

This module is the one entrance: the `import_agno` command and the rest of Parley import what it
names and nothing deeper."""

from sessions_app.agno_import.identities import (
    DEFAULT_PREFIX,
    UserMapping,
    username_problem,
)
from sessions_app.agno_import.importer import import_agno
from sessions_app.agno_import.report import Report
from sessions_app.agno_import.source import SourceError
from sessions_app.agno_import.user_map import MappingError, read_user_map

__all__ = [
    "DEFAULT_PREFIX",
    "MappingError",
    "Report",
    "SourceError",
    "UserMapping",
    "import_agno",
    "read_user_map",
    "username_problem",
]
