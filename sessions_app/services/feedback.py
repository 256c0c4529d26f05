"""Ratings on runs: the raw material of curated datasets."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from sessions_app.models import Run, User
from sessions_app.services.access import get_run_for_owner
from sessions_app.signals import send_run_rated


def set_feedback(user: User, run_id: Any, rating: int | None, comment: str = "") -> Run:
    """Rate a run 1 (good) or -1 (bad); None clears the rating. Only the run's owner rates."""
    if rating not in (1, -1, None):
        raise ValueError("rating must be 1 or -1.")
    run = get_run_for_owner(user, run_id)
    run.feedback_rating = rating
    run.feedback_comment = comment.strip()[:2000]
    run.feedback_at = timezone.now() if rating is not None else None
    run.save(update_fields=["feedback_rating", "feedback_comment", "feedback_at"])
    if rating is not None:
        send_run_rated(Run.objects.filter(pk=run.pk), rater="user")
    return run
