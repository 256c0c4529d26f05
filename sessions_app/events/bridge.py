"""Events between processes, through the channel layer (Redis), when there are several.

Each process has one channel, named after its worker id so that others can address it without a
registry. The channel is in the group of every session that this process's subscribers watch,
and the process is listed among that session's followers (`followers`). A run's events go to its
session's group, tagged with this process's id so that it skips its own copy, once another
process follows the session (`crossing`). Through the same channel a process answers what a run
of its own has streamed so far, and gets the answers to what it asked; other groups it joins
(sign-ins, see `signout`) bring messages of other types to `handlers`.

With the in-memory layer there is no other process and nothing passes through the layer: its
sends copy every message and scan every group.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from sessions_app.events import followers
from sessions_app.events.crossing import Crossing
from sessions_app.events.stream import Event, RunStream
from sessions_app.process import WORKER_ID, being_cancelled

log = logging.getLogger("parley.realtime")


def group_name(session_id: Any) -> str:
    # Group names allow fewer characters, and fewer of them, than session ids.
    return "session." + uuid.uuid5(uuid.NAMESPACE_URL, f"parley:session:{session_id}").hex


def worker_channel(worker_id: str) -> str:
    return "worker." + uuid.uuid5(uuid.NAMESPACE_URL, worker_id).hex


def crosses_processes() -> bool:
    """Whether other processes can listen: any channel layer but the in-memory one."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class _Membership:
    """This process's channel in one group: how many subscribers want it, and the last change
    sent (adds and discards go out in order, each after the one before). A session's group
    comes with this process's entry among the session's followers."""

    def __init__(self, session_id: str | None) -> None:
        self.session_id = session_id
        self.count = 0
        self.change: asyncio.Task[None] | None = None


class Bridge:
    def __init__(
        self, deliver: Callable[[Event], None], snapshot_of: Callable[[str], dict[str, Any]]
    ) -> None:
        self.deliver = deliver  # an event from another process, to this one's subscribers
        self.snapshot_of = snapshot_of  # what a run of ours has streamed so far
        # Other kinds of message sent to groups this process joined, by their "type".
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._layer: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    def _bind(self) -> None:
        """Start this process's pump and receivers on the running loop and the configured layer,
        once; again when either changes (tests run several of each) or a task has ended."""
        loop, layer = asyncio.get_running_loop(), get_channel_layer()
        if loop is self._loop and layer is self._layer and not any(t.done() for t in self._tasks):
            return
        for task in self._tasks:
            if task.get_loop() is loop:
                task.cancel()
        if self._loop is loop:
            self._close_followers()
        self._loop, self._layer = loop, layer
        self._outbox: asyncio.Queue[Event] = asyncio.Queue()
        self._groups: dict[str, _Membership] = {}
        self._asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._followers = followers.for_layer(layer, WORKER_ID)
        self._crossing = Crossing(self._followers, self.forward) if self._followers else None
        # Events and replies come on a channel of this process's own; requests for snapshots
        # on the one named after its worker id, where other processes can address it.
        self._channel: asyncio.Future[str] = loop.create_future()
        self._tasks = [
            loop.create_task(self._pump(), name="parley-events-pump"),
            loop.create_task(self._receive(), name="parley-events-receive"),
            loop.create_task(self._serve_snapshots(), name="parley-events-snapshots"),
        ]
        if self._crossing is not None:
            self._tasks += [
                loop.create_task(self._crossing.watch(), name="parley-events-crossing"),
                loop.create_task(self._renew(), name="parley-events-renew"),
            ]

    def _close_followers(self) -> None:
        """The registry's client of the previous binding on this loop, closed."""
        previous = getattr(self, "_followers", None)
        if previous is not None:
            task = asyncio.get_running_loop().create_task(previous.close())
            task.add_done_callback(_log_failure)

    def forward(self, event: Event) -> None:
        """Queue an event for the other processes; one pump keeps the order."""
        self._bind()
        self._outbox.put_nowait(event)

    def started(self, stream: RunStream) -> None:
        """A run streams here: its events go across once another process follows its session
        (asked of Redis in a moment, after its row was committed: a follower that joins later
        finds the run and asks for it, see `send_across`)."""
        self._bind()
        if self._crossing is None:  # nobody to ask who follows: across, always
            self.send_across(stream)
        else:
            self._crossing.started(stream)

    def send_across(self, stream: RunStream) -> None:
        """A process follows the run from now on (it asked what the run streamed so far)."""
        if self._crossing is None:
            stream.crossing = True
        else:
            self._crossing.send_across(stream)

    async def join(self, session_id: str) -> None:
        """Once this returns, events published anywhere in the session reach this process."""
        await self.join_group(group_name(session_id), session_id)

    def leave(self, session_id: str) -> None:
        self.leave_group(group_name(session_id))

    async def join_group(self, group: str, session_id: str | None = None) -> None:
        """Once this returns, what is sent to the group anywhere reaches this process."""
        self._bind()
        membership = self._groups.setdefault(group, _Membership(session_id))
        membership.count += 1
        if membership.count == 1:
            membership.change = self._change(membership, "group_add", group)
        try:
            await asyncio.shield(membership.change)
        except BaseException:
            self.leave_group(group)
            raise

    def leave_group(self, group: str) -> None:
        if self._loop is not asyncio.get_running_loop():
            return  # joined on a loop that has ended (tests run several), and its groups with it
        membership = self._groups.get(group)
        if membership is None or membership.count == 0:
            return
        membership.count -= 1
        if membership.count == 0:
            membership.change = self._change(membership, "group_discard", group)

    def _change(self, membership: _Membership, method: str, group: str) -> asyncio.Task:
        previous, layer, registry = membership.change, self._layer, self._followers
        session_id = membership.session_id

        async def change() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await getattr(layer, method)(group, await self._channel)
            if registry is not None and session_id is not None:
                # Listed once in the group: whatever a run sends from then on reaches us.
                if method == "group_add":
                    await registry.add([session_id])
                else:
                    await registry.remove(session_id)

        task = asyncio.get_running_loop().create_task(change(), name=f"parley-events-{method}")
        task.add_done_callback(_log_failure)
        return task

    async def ask_snapshot(self, worker_id: str, run_id: str, limit: float) -> dict | None:
        """What the process `worker_id` has streamed of the run; None if it did not answer."""
        self._bind()
        nonce = uuid.uuid4().hex
        answer = self._asked[nonce] = asyncio.get_running_loop().create_future()
        request = {"type": "snapshot.request", "run_id": run_id, "reply_to": await self._channel}
        try:
            await self._layer.send(worker_channel(worker_id), {**request, "nonce": nonce})
            async with asyncio.timeout(limit):
                return await answer
        except TimeoutError:
            return None
        finally:
            self._asked.pop(nonce, None)

    async def drain(self) -> None:
        """Wait (5 s at most) until every event published so far that has a follower elsewhere
        has left this process."""
        if self._loop is asyncio.get_running_loop():
            async with asyncio.timeout(5.0):
                if self._crossing is not None:
                    await self._crossing.settle()
                await self._outbox.join()

    async def warm(self) -> None:
        """Connections to Redis open (this process's channel, its registry of followers), as
        a process starts: nothing waits for one to open later."""
        if not crosses_processes():
            return
        self._bind()
        # channels_redis opens a connection with its first command, and has none that only
        # opens one: leaving a group this process is not in changes nothing.
        await self._layer.group_discard(group_name("warm-up"), await self._channel)
        if self._followers is not None:
            await self._followers.client.ping()

    async def forget(self) -> None:
        """As this process stops: off the followers of every session, the registry closed."""
        if self._loop is asyncio.get_running_loop() and self._followers is not None:
            try:
                await self._followers.remove_all(self._followed())
            finally:
                await self._followers.close()  # its connections; it reconnects if used again

    async def _pump(self) -> None:
        """Forward queued events: in order within a session, sessions side by side, all that
        waits at each pass (one send at a time capped a process at an event per loop turn)."""
        layer = self._layer
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

    async def _renew(self) -> None:
        """Keep this process listed among the followers of the sessions it follows, and in
        their groups (channels_redis forgets a member after a day)."""
        while True:
            await asyncio.sleep(followers.RENEW_EVERY)
            try:
                await self._rejoin(self._layer, await self._channel)
            except Exception:
                if being_cancelled():
                    raise asyncio.CancelledError from None
                log.exception("could not renew this process's entries among followers")

    def _followed(self) -> list[str]:
        return [m.session_id for m in self._groups.values() if m.count and m.session_id]

    async def _receive(self) -> None:
        layer = self._layer
        channel = await layer.new_channel()
        self._channel.set_result(channel)
        await self._listen(layer, channel, rejoin=True)

    async def _serve_snapshots(self) -> None:
        await self._listen(self._layer, worker_channel(WORKER_ID))

    async def _listen(self, layer: Any, channel: str, *, rejoin: bool = False) -> None:
        """Handle what comes on `channel`. After a failure (Redis restarted, say), with `rejoin`,
        this process's channel is added to its groups again: a Redis that restarted empty has
        forgotten them, and the sessions watched here would hear nothing more from elsewhere."""
        failed = False
        while True:
            try:
                if failed and rejoin:
                    await self._rejoin(layer, channel)
                failed = False
                await self._handle(layer, await _receive_until_cancelled(layer, channel))
            except asyncio.CancelledError:
                raise
            except Exception:
                if being_cancelled():
                    raise asyncio.CancelledError from None
                log.exception("this process's event channel failed")
                failed = True
                await asyncio.sleep(1)

    async def _rejoin(self, layer: Any, channel: str) -> None:
        watched = [name for name, membership in self._groups.items() if membership.count]
        await asyncio.gather(*(layer.group_add(name, channel) for name in watched))
        if self._followers is not None:
            await self._followers.add(self._followed())

    async def _handle(self, layer: Any, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "event" and message.get("origin") != WORKER_ID:
            self.deliver(message["event"])
        elif kind == "snapshot.request":  # another process follows the run from now on
            reply = {**self.snapshot_of(message["run_id"]), "nonce": message.get("nonce")}
            await layer.send(message["reply_to"], {**reply, "type": "snapshot.reply"})
        elif kind == "snapshot.reply":
            answer = self._asked.get(message.get("nonce") or "")
            if answer is not None and not answer.done():
                answer.set_result(message)
        elif kind in self.handlers:
            self.handlers[kind](message)


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


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("could not change a group of the channel layer", exc_info=task.exception())
