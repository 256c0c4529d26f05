"""Events between processes, through the channel layer (Redis), when there are several.

Each process has one channel, named after its worker id so that others can address it without a
registry. The channel is in the group of every session that this process's subscribers watch;
events published here go to the session's group, tagged with this process's id so that it skips
its own copy. Through the same channel a process answers what a run of its own has streamed so
far, and gets the answers to what it asked. With the in-memory layer there is no other process
and nothing passes through the layer: its sends copy every message and scan every group.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from sessions_app.events.stream import Event
from sessions_app.process import WORKER_ID, being_cancelled

log = logging.getLogger("parley.realtime")


def group_name(session_id: Any) -> str:
    return f"session.{uuid.UUID(str(session_id)).hex}"


def worker_channel(worker_id: str) -> str:
    return "worker." + uuid.uuid5(uuid.NAMESPACE_URL, worker_id).hex


def crosses_processes() -> bool:
    """Whether other processes can listen: any channel layer but the in-memory one."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class Bridge:
    def __init__(
        self, deliver: Callable[[Event], None], snapshot_of: Callable[[str], dict[str, Any]]
    ) -> None:
        self.deliver = deliver  # an event from another process, to this one's subscribers
        self.snapshot_of = snapshot_of  # what a run of ours has streamed so far
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind(self) -> None:
        """Start this process's pump and receiver on the running loop, once per loop."""
        loop = asyncio.get_running_loop()
        if loop is self._loop and not self._tasks[0].done():
            return
        self._loop = loop
        self._outbox: asyncio.Queue[Event] = asyncio.Queue()
        self._watched: dict[str, int] = {}  # group -> this process's subscribers to it
        self._asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # Events and replies come on a channel of this process's own; requests for snapshots
        # on the one named after its worker id, where other processes can address it.
        self._channel: asyncio.Future[str] = loop.create_future()
        self._tasks = [
            loop.create_task(self._pump(), name="parley-events-pump"),
            loop.create_task(self._receive(), name="parley-events-receive"),
            loop.create_task(self._serve_snapshots(), name="parley-events-snapshots"),
        ]

    def forward(self, event: Event) -> None:
        """Queue an event for the other processes; one pump keeps the order."""
        self._bind()
        self._outbox.put_nowait(event)

    async def join(self, session_id: str) -> None:
        self._bind()
        group = group_name(session_id)
        self._watched[group] = self._watched.get(group, 0) + 1
        if self._watched[group] == 1:
            await get_channel_layer().group_add(group, await self._channel)

    def leave(self, session_id: str) -> None:
        if self._loop is not asyncio.get_running_loop():
            return  # joined on a loop that has ended (tests run several), and its groups with it
        group = group_name(session_id)
        left = self._watched.get(group, 0) - 1
        if left > 0:
            self._watched[group] = left
            return
        self._watched.pop(group, None)
        if self._channel.done():
            discard = get_channel_layer().group_discard(group, self._channel.result())
            asyncio.get_running_loop().create_task(discard)

    async def ask_snapshot(self, worker_id: str, run_id: str, limit: float) -> dict | None:
        """What the process `worker_id` has streamed of the run; None if it did not answer."""
        self._bind()
        nonce = uuid.uuid4().hex
        answer = self._asked[nonce] = asyncio.get_running_loop().create_future()
        request = {"type": "snapshot.request", "run_id": run_id, "reply_to": await self._channel}
        try:
            await get_channel_layer().send(worker_channel(worker_id), {**request, "nonce": nonce})
            async with asyncio.timeout(limit):
                return await answer
        except TimeoutError:
            return None
        finally:
            self._asked.pop(nonce, None)

    async def drain(self) -> None:
        """Wait (5 s at most) until every event published so far has left this process."""
        if self._loop is asyncio.get_running_loop():
            async with asyncio.timeout(5.0):
                await self._outbox.join()

    async def _pump(self) -> None:
        """Forward queued events: in order within a session, sessions side by side, all that
        waits at each pass (one send at a time capped a process at an event per loop turn)."""
        layer = get_channel_layer()
        while True:
            batch = [await self._outbox.get()]
            while not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            by_group: dict[str, list[Event]] = {}
            for event in batch:
                by_group.setdefault(group_name(event["session_id"]), []).append(event)
            try:
                await asyncio.gather(*(self._send(layer, g, evs) for g, evs in by_group.items()))
            finally:
                for _ in batch:
                    self._outbox.task_done()

    async def _send(self, layer: Any, group: str, events: list[Event]) -> None:
        for event in events:
            try:
                await layer.group_send(
                    group, {"type": "event", "event": event, "origin": WORKER_ID}
                )
            except Exception:
                if being_cancelled():
                    raise asyncio.CancelledError from None
                log.exception("could not forward an event")

    async def _receive(self) -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        self._channel.set_result(channel)
        await self._listen(layer, channel)

    async def _serve_snapshots(self) -> None:
        await self._listen(get_channel_layer(), worker_channel(WORKER_ID))

    async def _listen(self, layer: Any, channel: str) -> None:
        while True:
            try:
                await self._handle(layer, await _receive_until_cancelled(layer, channel))
            except asyncio.CancelledError:
                raise
            except Exception:
                if being_cancelled():
                    raise asyncio.CancelledError from None
                log.exception("this process's event channel failed")
                await asyncio.sleep(1)

    async def _handle(self, layer: Any, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "event" and message.get("origin") != WORKER_ID:
            self.deliver(message["event"])
        elif kind == "snapshot.request":
            reply = {**self.snapshot_of(message["run_id"]), "nonce": message.get("nonce")}
            await layer.send(message["reply_to"], {**reply, "type": "snapshot.reply"})
        elif kind == "snapshot.reply":
            answer = self._asked.get(message.get("nonce") or "")
            if answer is not None and not answer.done():
                answer.set_result(message)


async def _receive_until_cancelled(layer: Any, channel: str) -> dict[str, Any]:
    """`layer.receive(channel)`, stopped for sure when this task is cancelled.

    redis-py can take a cancellation that lands in its blocking read for a timeout and retry the
    read, so one cancel may not end it: the receive is cancelled again until it has ended."""
    receiving = asyncio.ensure_future(layer.receive(channel))
    try:
        return await asyncio.shield(receiving)
    except asyncio.CancelledError:
        while not receiving.done():
            receiving.cancel()
            await asyncio.wait([receiving], timeout=0.1)
        if not receiving.cancelled():
            receiving.exception()  # retrieved: an error while stopping says nothing more
        raise
