"""Run events to every WebSocket watching the session, in this process and in others.

Sockets in the process running the run are handed each event directly, in order, by a listener
they register for their session. When other processes can listen (the Redis layer), every event
is also forwarded, in order, to the session's group, tagged with this process's id so that its
own sockets skip the copy they already have. With the in-memory layer there is no other process,
and events never pass through the layer: its sends copy every message and scan every channel and
group, which at a few hundred sockets cost more than the streaming itself.

A consumer that starts watching mid-answer needs what was streamed before it joined: it asks
the process running the run for a snapshot (content and seq) through that process's own channel,
then applies only later events. So a reload or a second tab sees no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from sessions_app.events import stream as streams
from sessions_app.process import WORKER_ID, being_cancelled

log = logging.getLogger("parley.realtime")

_queue: asyncio.Queue[streams.Event] | None = None
_tasks: list[asyncio.Task[None]] = []
Listener = Callable[[streams.Event], None]
_listeners: dict[str, set[Listener]] = {}  # session id (str) -> this process's sockets


def group_name(session_id: Any) -> str:
    return f"session.{uuid.UUID(str(session_id)).hex}"


def worker_channel(worker_id: str) -> str:
    """Where a process listens for snapshot requests about the runs it streams."""
    return "worker." + uuid.uuid5(uuid.NAMESPACE_URL, worker_id).hex


def listen(session_id: Any, listener: Listener) -> None:
    """Call `listener` with every event of the session's runs streamed in this process."""
    _listeners.setdefault(str(session_id), set()).add(listener)


def unlisten(session_id: Any, listener: Listener) -> None:
    listeners = _listeners.get(str(session_id))
    if listeners is not None:
        listeners.discard(listener)
        if not listeners:
            del _listeners[str(session_id)]


def crosses_processes() -> bool:
    """Whether other processes can listen: any channel layer but the in-memory one."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


def forward(event: streams.Event) -> None:
    """The stream sink: hand the event to local sockets, and queue it for the group when other
    processes can listen; one pump keeps the order."""
    for listener in tuple(_listeners.get(event["session_id"], ())):
        listener(event)
    if not crosses_processes():
        return
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
    """Forward queued events: in order within a session, sessions side by side.

    Awaiting one group_send at a time capped the whole process at about one event per loop turn
    (the in-memory layer's send takes several turns, Redis's a round trip): under load the queue
    grew and every piece of every answer arrived seconds late. Each pass takes all that waits.
    """
    layer = get_channel_layer()
    while True:
        batch = [await queue.get()]
        while not queue.empty():
            batch.append(queue.get_nowait())
        by_group: dict[str, list[streams.Event]] = {}
        for event in batch:
            by_group.setdefault(group_name(event["session_id"]), []).append(event)
        try:
            await asyncio.gather(*(_send_in_order(layer, g, evs) for g, evs in by_group.items()))
        finally:
            for _ in batch:
                queue.task_done()


async def _send_in_order(layer: Any, group: str, events: list[streams.Event]) -> None:
    for event in events:
        try:
            await layer.group_send(
                group, {"type": "run.event", "event": event, "origin": WORKER_ID}
            )
        except Exception:
            if being_cancelled():
                raise asyncio.CancelledError from None
            log.exception("could not forward a run event")


async def drain() -> None:
    """Wait (5 s at most) until every event published so far has left this process."""
    if _queue is not None:
        await asyncio.wait_for(_queue.join(), 5.0)


async def _serve_snapshots() -> None:
    """Answer other processes asking what a run of ours has streamed so far.

    The channel's name is derived from the worker id stored on each run, so other processes
    can address this one without any registry.
    """
    layer = get_channel_layer()
    channel = worker_channel(WORKER_ID)
    while True:
        try:
            request = await layer.receive(channel)
            await layer.send(request["reply_to"], snapshot_message(request["run_id"]))
        except asyncio.CancelledError:
            raise
        except Exception:
            if being_cancelled():
                raise asyncio.CancelledError from None
            log.exception("snapshot channel failed")
            await asyncio.sleep(1)


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
