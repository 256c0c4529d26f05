"""Run events across processes, through the channel layer.

Every event a run publishes is forwarded, in order, to the group of its session, where each
WebSocket watching that session receives it — in this process or another one behind the same
Redis. A consumer that starts watching mid-answer needs what was streamed before it joined: it asks
the process running the run for a snapshot (content and seq) through that process's own channel,
then applies only later events. So a reload or a second tab sees no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from channels.layers import get_channel_layer

from sessions_app.services import liveness, streams

log = logging.getLogger("parley.realtime")

_queue: asyncio.Queue[streams.Event] | None = None
_tasks: list[asyncio.Task[None]] = []


def group_name(session_id: Any) -> str:
    return f"session.{uuid.UUID(str(session_id)).hex}"


def worker_channel(worker_id: str) -> str:
    return "parley.worker." + uuid.uuid5(uuid.NAMESPACE_URL, worker_id).hex


WORKER_CHANNEL = worker_channel(liveness.WORKER_ID)


def forward(event: streams.Event) -> None:
    """The stream sink: queue the event for the group; one pump keeps the order."""
    global _queue
    loop = asyncio.get_running_loop()
    if _queue is None or not _tasks or _tasks[0].get_loop() is not loop or _tasks[0].done():
        _queue = asyncio.Queue()
        _tasks[:] = [
            loop.create_task(_pump(_queue), name="parley-realtime-pump"),
            loop.create_task(_serve_snapshots(), name="parley-realtime-snapshots"),
        ]
    _queue.put_nowait(event)


async def _pump(queue: asyncio.Queue[streams.Event]) -> None:
    layer = get_channel_layer()
    while True:
        event = await queue.get()
        try:
            await layer.group_send(
                group_name(event["session_id"]), {"type": "run.event", "event": event}
            )
        except Exception:
            log.exception("could not forward a run event")


async def _serve_snapshots() -> None:
    """Answer other processes asking what a run of ours has streamed so far."""
    layer = get_channel_layer()
    while True:
        try:
            request = await layer.receive(WORKER_CHANNEL)
        except Exception:
            log.exception("snapshot channel failed")
            await asyncio.sleep(1)
            continue
        await layer.send(request["reply_to"], snapshot_message(request["run_id"]))


def snapshot_message(run_id: Any) -> dict[str, Any]:
    stream = streams.get_stream(uuid.UUID(str(run_id)))
    if stream is None:
        return {"type": "run.snapshot", "run_id": str(run_id), "found": False}
    return {
        "type": "run.snapshot",
        "run_id": str(run_id),
        "found": True,
        "content": stream.content_so_far(),
        "seq": stream.seq,
    }


async def request_snapshot(worker_id: str, run_id: Any, reply_to: str) -> None:
    await get_channel_layer().send(
        worker_channel(worker_id),
        {"type": "snapshot.request", "run_id": str(run_id), "reply_to": reply_to},
    )
