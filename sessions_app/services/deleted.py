"""What deleted runs and sessions leave behind, without a word of the conversation.

A deleted run leaves a DeletedRun row, so the usage figures that count runs (runs started, by
status, by session, ratings) and the limit on runs per minute still count it. A session deleted
soon after it was made leaves a DeletedSession row, which the limit on new sessions counts.
(Model calls stay by themselves: see models.KEEP_USAGE.)

Written from Django's pre_delete signal, inside the deletion's transaction, so every door that
deletes them (the API, the chat page, the admin, a session's or a run's own deletion) leaves
them. Deleting a user is the exception: their usage goes with them, as their model calls do.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.db.models.signals import pre_delete
from django.utils import timezone

from sessions_app.models import DeletedRun, DeletedSession, Run, Session, User
from sessions_app.services.ratelimit import KEEP


def _erasing_a_user(origin: Any) -> bool:
    if isinstance(origin, QuerySet):
        return issubclass(origin.model, User)
    return isinstance(origin, User)


def keep_run(sender: type[Run], instance: Run, origin: Any = None, **kwargs: Any) -> None:
    if _erasing_a_user(origin):
        return
    record = DeletedRun(
        run_id=instance.pk,
        session_id=instance.session_id,
        user_id=instance.user_id,
        agent_id=instance.agent_id,
        model=instance.model,
        status=instance.status,
        created_at=instance.created_at,
        feedback_rating=instance.feedback_rating,
        feedback_at=instance.feedback_at,
    )
    # One INSERT; a record already there (a run restored from a backup, deleted again) stands.
    DeletedRun.objects.bulk_create([record], ignore_conflicts=True)


def keep_session(
    sender: type[Session], instance: Session, origin: Any = None, **kwargs: Any
) -> None:
    if _erasing_a_user(origin) or instance.created_at < timezone.now() - KEEP:
        return
    DeletedSession.objects.create(user_id=instance.user_id, created_at=instance.created_at)


def connect() -> None:
    pre_delete.connect(keep_run, sender=Run, dispatch_uid="parley-deleted-runs")
    pre_delete.connect(keep_session, sender=Session, dispatch_uid="parley-deleted-sessions")
