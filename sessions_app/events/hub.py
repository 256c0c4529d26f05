"""This process's run streams and subscribers, and `subscribe`: a snapshot, then live events."""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

from sessions_app.events.bridge import Bridge, crosses_processes
from sessions_app.events.stream import TERMINAL_EVENTS, Event, RunStream
from sessions_app.models import Run
from sessions_app.process import WORKER_ID

# How long a process streaming a run may take to say what it streamed so far.
SNAPSHOT_TIMEOUT = 3.0
FINISHED = 2**31  # the seq seen of a run shown as stored: no later event adds to it


class _Subscriber:
    def __init__(self, session_id: str, run_id: str | None) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.seen: dict[str, int] = {}  # run id -> the last seq given
        self.across = False  # whether it joined the session's group for other processes

    def offer(self, event: Event) -> None:
        if self.run_id is None or event.get("run_id") == self.run_id:
            self.queue.put_nowait(event)

    def fresh(self, event: Event) -> bool:
        """Whether the event is news to this subscriber (an event of a run carries its seq)."""
        run_id = event.get("run_id")
        if run_id is None:
            return True
        # A run going on (after a pause, or a failed try) counts on from where its stream
        # ended, which one shown it as stored (FINISHED) or left by a dead process never saw.
        goes_on = event["event"] == "RunContinued"
        if event["seq"] <= self.seen.get(run_id, 0) and not goes_on:
            return False
        self.seen[run_id] = event["seq"]
        return True


class Hub:
    def __init__(self) -> None:
        self.streams: dict[uuid.UUID, RunStream] = {}  # streaming in this process
        # Ended, kept while something holds them (a run's handle, for its SSE response).
        self.ended: weakref.WeakValueDictionary[uuid.UUID, RunStream] = (
            weakref.WeakValueDictionary()
        )
        self.subscribers: dict[str, set[_Subscriber]] = {}  # by session id
        self.bridge = Bridge(self.deliver, self.snapshot_of)

    def open_stream(
        self, run_id: uuid.UUID, session_id: str, *, seq_from: int = 0, said: str = ""
    ) -> RunStream:
        stream = RunStream(run_id, session_id, self.publish, seq_from=seq_from, said=said)
        self.streams[run_id] = stream
        self.ended.pop(run_id, None)
        if crosses_processes():
            self.bridge.started(stream)
        return stream

    def publish(self, event: Event, stream: RunStream | None = None) -> None:
        """`stream`: the run's, when it streams here (its events cross only when followed
        elsewhere); else an event of the session, or news of a run from nowhere else."""
        self.deliver(event)
        if crosses_processes() and (stream is None or stream.crossing):
            self.bridge.forward(event)
        if event["event"] in TERMINAL_EVENTS:
            ended = self.streams.pop(uuid.UUID(event["run_id"]), None)
            if ended is not None:
                self.ended[ended.run_id] = ended

    def deliver(self, event: Event) -> None:
        """To this process's subscribers of the event's session."""
        for subscriber in tuple(self.subscribers.get(event["session_id"], ())):
            subscriber.offer(event)

    def stream_of(self, run_id: Any) -> RunStream | None:
        """A run's stream in this process: streaming, or ended and still held."""
        key = uuid.UUID(str(run_id))
        return self.streams.get(key) or self.ended.get(key)

    def snapshot_of(self, run_id: str) -> dict[str, Any]:
        """What a run of ours streamed so far, for a process that follows it from now on."""
        stream = self.streams.get(uuid.UUID(run_id))
        if stream is None:
            return {"run_id": run_id, "found": False}
        self.bridge.send_across(stream)
        return {
            "run_id": run_id,
            "found": True,
            "content": stream.content_so_far(),
            "seq": stream.seq,
        }

    async def join(self, subscriber: _Subscriber, *, across: bool) -> None:
        self.subscribers.setdefault(subscriber.session_id, set()).add(subscriber)
        if across and crosses_processes():
            await self.bridge.join(subscriber.session_id)
            subscriber.across = True

    def leave(self, subscriber: _Subscriber) -> None:
        watching = self.subscribers.get(subscriber.session_id)
        if watching is None or subscriber not in watching:
            return
        watching.discard(subscriber)
        if not watching:
            del self.subscribers[subscriber.session_id]
        if subscriber.across:
            self.bridge.leave(subscriber.session_id)


hub = Hub()
open_stream = hub.open_stream
drain = hub.bridge.drain
forget = hub.bridge.forget
warm = hub.bridge.warm


def publish_session(session_id: Any, event_type: str, **data: Any) -> None:
    """An event of the session itself (not of a run), e.g. its new title."""
    hub.publish({"event": event_type, "session_id": str(session_id), **data})


async def subscribe(
    session_id: Any, *, run_id: Any = None, after_seq: int = 0, idle: float | None = None
) -> AsyncIterator[Event | None]:
    """Watching a session: first a `Snapshot` (its runs as stored and, for the one streaming
    here, what was streamed so far); a `RunSnapshot` when another process says what it streamed
    of its run; then every later event of the session.
    Following one run: its events after `after_seq`, until its last.
    With `idle`, None after each `idle` seconds without an event (for keep-alives)."""
    subscriber = _Subscriber(str(session_id), str(run_id) if run_id else None)
    stream = hub.stream_of(run_id) if run_id else None
    try:
        # Joined before anything is read: whatever is published from here on reaches the queue.
        # A run streaming here needs no events from elsewhere.
        await hub.join(subscriber, across=stream is None)
        if run_id is None:
            snapshot, elsewhere = await _snapshot(subscriber)
            yield snapshot
            for run in elsewhere:
                yield await _run_snapshot(subscriber, run)
        elif stream is not None:
            subscriber.seen[str(run_id)] = after_seq
            for event in list(stream.events):
                if subscriber.fresh(event):
                    yield event
                    if event["event"] in TERMINAL_EVENTS:
                        return
        async for event in _live(subscriber, idle):
            yield event
    finally:
        hub.leave(subscriber)


async def _live(subscriber: _Subscriber, idle: float | None) -> AsyncIterator[Event | None]:
    while True:
        try:
            async with asyncio.timeout(idle):
                event = await subscriber.queue.get()
        except TimeoutError:
            yield None
            continue
        if not subscriber.fresh(event):
            continue
        yield event
        if subscriber.run_id is not None and event["event"] in TERMINAL_EVENTS:
            return


async def _snapshot(subscriber: _Subscriber) -> tuple[Event, list[Run]]:
    """The session's runs, the streaming one's answer so far where this process can tell, and
    the runs streaming in other processes, shown as last saved until those processes answer."""
    runs = [
        run
        async for run in Run.objects.filter(session_id=subscriber.session_id).order_by("position")
    ]
    streamed: dict[str, str] = {}
    elsewhere: list[Run] = []
    for n, run in enumerate(runs):
        seq = FINISHED
        if run.is_active:
            stream = hub.streams.get(run.run_id)
            if stream is not None:
                streamed[str(run.run_id)], seq = stream.content_so_far(), stream.seq
            elif run.worker != WORKER_ID and crosses_processes():
                streamed[str(run.run_id)], seq = run.content, run.content_seq
                elsewhere.append(run)
            else:  # no process has it: it finished a moment ago, or its process died
                runs[n] = run = await Run.objects.aget(pk=run.pk)
                seq = run.content_seq if run.is_active else FINISHED
                if run.is_active:
                    streamed[str(run.run_id)] = run.content
        subscriber.seen[str(run.run_id)] = seq
    snapshot = {"event": "Snapshot", "session_id": subscriber.session_id, "runs": runs}
    return {**snapshot, "streamed": streamed}, elsewhere


async def _run_snapshot(subscriber: _Subscriber, run: Run) -> Event:
    """What the process streaming `run` has sent so far; if it does not answer in time, the run
    as stored (finished meanwhile, or its process died or is slow)."""
    found = await hub.bridge.ask_snapshot(run.worker, str(run.run_id), SNAPSHOT_TIMEOUT)
    if found is not None and found.get("found"):
        content, seq = found["content"], found["seq"]
    else:
        run = await Run.objects.aget(pk=run.pk)
        content, seq = run.content, run.content_seq if run.is_active else FINISHED
    subscriber.seen[str(run.run_id)] = seq
    event = {"event": "RunSnapshot", "session_id": subscriber.session_id, "run": run}
    return {**event, "run_id": str(run.run_id), "content": content}
