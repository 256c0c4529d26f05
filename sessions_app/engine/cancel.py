"""Stopping a run, wherever it streams."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from sessions_app.engine import liveness
from sessions_app.engine.registry import registry
from sessions_app.models import ACTIVE_STATUSES, Run, RunStatus, User
from sessions_app.services.access import get_run_for_user


async def cancel_run(user: User, run_id: Any) -> Run:
    """At once when it streams in this process, else at its process's next checkpoint or
    heartbeat (or now, when that process is gone, or it waits for its client's tools). The
    run as it then stands, its user and agent version loaded.
    Another's run takes the right to change runs."""
    run = await database_sync_to_async(get_run_for_user)(user, run_id, "change")
    task = registry.cancel_local(run.run_id)
    if task is not None:
        await asyncio.shield(asyncio.wait([task]))
    elif run.is_active:
        await Run.objects.filter(pk=run.run_id, status__in=ACTIVE_STATUSES).aupdate(
            cancel_requested=True
        )
        await liveness.reap_and_announce(session_id=run.session_id)
    elif run.status == RunStatus.PAUSED:
        # Its client will not send its tools' results: the run ends as it stands.
        paused = Run.objects.filter(pk=run.run_id, status=RunStatus.PAUSED)
        if await paused.aupdate(status=RunStatus.CANCELLED, finished_at=timezone.now()):
            liveness.announce([(run.run_id, run.session_id)])
        else:  # its results came meanwhile: it runs now, and is stopped as such
            return await cancel_run(user, run_id)
    return await Run.objects.select_related("user", "agent_version").aget(pk=run.run_id)
