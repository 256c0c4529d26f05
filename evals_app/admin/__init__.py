"""Experiments in the staff console: started from a form, watched while they run, read as a
report with charts and side-by-side items, and judged blind by people.

Importing the package registers the experiments' ModelAdmin on Parley's admin site.
"""

from __future__ import annotations

from evals_app.admin import experiments

__all__ = ["experiments"]
