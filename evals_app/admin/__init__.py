"""Evaluation in the staff console: experiments started from a form, watched while they run, read
as a report with charts and side-by-side items, and judged blind by people; the rules that score
live runs.

Importing the modules registers their ModelAdmins, and what evaluation adds to the chat app's
pages: to the run admin, a filter by score and a panel of a run's scores (`run_scores`); to the
dashboard, live scores and what evaluating cost (`evals_app.dashboard`).
"""

from __future__ import annotations

from evals_app import dashboard
from evals_app.admin import experiments, rules, run_scores

run_scores.install()
dashboard.install()

__all__ = ["experiments", "rules", "run_scores"]
