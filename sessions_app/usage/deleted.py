"""What deleted runs and sessions leave behind, without a word of the conversation.

A deleted run leaves a DeletedRun row, so the usage figures that count runs (runs started, by
status, by session, ratings) and the limit on runs per minute still count it. A session deleted
soon after it was made leaves a DeletedSession row, which the limit on new sessions counts.
(Model calls stay by themselves: see models.KEEP_USAGE.)

Gathered from Django's deletion signals and written in one INSERT per kind, inside the
deletion's transaction, so every door that deletes them (the API, the chat page, the admin, a
session's or a run's own deletion) leaves them; the deletion reads of the rows only what the
records need (models.CASCADE_LEAN). Deleting a user is the exception: their usage goes with
them, as their model calls do.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db.models import QuerySet
from django.db.models.signals import post_delete, pre_delete
from django.utils import timezone

from sessions_app.models import DeletedRun, DeletedSession, Run, Session, User
from sessions_app.services.ratelimit import KEEP

# Records of the rows a deletion in this thread is about to delete, and the deletion (its
# origin) they belong to: Django announces each row alone (pre_delete), then deletes them all,
# then announces each again (post_delete), the first of which writes them in one INSERT.
_pending = threading.local()


def _erasing_a_user(origin: Any) -> bool:
    if isinstance(origin, QuerySet):
        return issubclass(origin.model, User)
    return isinstance(origin, User)


def _keep(record: DeletedRun | DeletedSession, origin: Any) -> None:
    # Records left by a deletion that failed before writing them are not this one's.
    if getattr(_pending, "origin", None) is not origin:
        _pending.origin, _pending.records = origin, []
    _pending.records.append(record)


def _write(**kwargs: Any) -> None:
    records, _pending.records = getattr(_pending, "records", []), []
    runs = [r for r in records if isinstance(r, DeletedRun)]
    sessions = [r for r in records if isinstance(r, DeletedSession)]
    # A record already there (a run restored from a backup, deleted again) stands.
    if runs:
        DeletedRun.objects.bulk_create(runs, ignore_conflicts=True)
    if sessions:
        DeletedSession.objects.bulk_create(sessions)


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
        source=instance.source,
        created_at=instance.created_at,
        feedback_rating=instance.feedback_rating,
        feedback_at=instance.feedback_at,
    )
    _keep(record, origin)


def keep_session(
    sender: type[Session], instance: Session, origin: Any = None, **kwargs: Any
) -> None:
    if _erasing_a_user(origin) or instance.created_at < timezone.now() - KEEP:
        return
    _keep(DeletedSession(user_id=instance.user_id, created_at=instance.created_at), origin)


def connect() -> None:
    pre_delete.connect(keep_run, sender=Run, dispatch_uid="parley-deleted-runs")
    pre_delete.connect(keep_session, sender=Session, dispatch_uid="parley-deleted-sessions")
    # Django deletes sessions after their runs: the first row gone of either writes them all.
    post_delete.connect(_write, sender=Run, dispatch_uid="parley-deleted-runs-written")
    post_delete.connect(_write, sender=Session, dispatch_uid="parley-deleted-sessions-written")
