"""Usage: what every model call and run cost, kept past deletion, summed over time, rolled up by
day, and drawn on the staff dashboard.

This module is the one entrance: the rest of Parley imports what it names and nothing deeper.
Its tables are sessions_app's models (`models/usage.py`, `models/rollups.py`,
`models/deletion.py`).
"""

from __future__ import annotations

from sessions_app.usage import accounting, deleted, metrics
from sessions_app.usage.dashboard import Dashboard, Scope, Tile, build, table
from sessions_app.usage.dashboard.extensions import ExtraChart
from sessions_app.usage.dashboard.extensions import Figures as DashboardFigures
from sessions_app.usage.dashboard.extensions import Part as DashboardPart
from sessions_app.usage.dashboard.extensions import add_part as add_dashboard_part
from sessions_app.usage.dashboard.page import dashboard_view
from sessions_app.usage.rollups import add_late, closed_before, fill

__all__ = [
    "Dashboard",
    "DashboardFigures",
    "DashboardPart",
    "ExtraChart",
    "Scope",
    "Tile",
    "accounting",
    "add_dashboard_part",
    "add_late",
    "build",
    "closed_before",
    "dashboard_view",
    "deleted",
    "fill",
    "metrics",
    "table",
]
