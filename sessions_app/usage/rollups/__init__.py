"""Daily rollups of usage: per-UTC-day sums of runs, ratings and model calls, and histograms of
chat calls' times, made once a day is closed (sessions_app.models.RolledDay and what follows).
"""

from __future__ import annotations

from sessions_app.usage.rollups.days import add_late, closed_before, fill

__all__ = ["add_late", "closed_before", "fill"]
