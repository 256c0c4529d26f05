"""Which of this process's runs send their events to other processes: those whose session another
process follows (`followers`). Asked of Redis as each run starts (after its row was committed),
and again every few seconds for the runs still streaming here unfollowed, so that a follower
whose entry came late (Redis restarted, say) gets the run. A follower that joins mid-run asks
this process for what the run streamed so far (bridge's snapshot request), which sends it across
too. Sent late, a run's events go from its first: a follower skips by seq what it has seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sessions_app.events.followers import Followers
from sessions_app.events.stream import Event, RunStream
from sessions_app.process import being_cancelled

log = logging.getLogger("parley.realtime")

# Seconds between looks at the runs streaming here that nobody elsewhere followed yet.
RECHECK_EVERY = 5.0


class Crossing:
    def __init__(self, registry: Followers, forward: Callable[[Event], None]) -> None:
        self.registry = registry
        self._forward = forward
        self._starting: asyncio.Queue[RunStream] = asyncio.Queue()
        self._unfollowed: set[RunStream] = set()

    def started(self, stream: RunStream) -> None:
        self._starting.put_nowait(stream)

    def send_across(self, stream: RunStream) -> None:
        """From now on, and from its first event."""
        self._unfollowed.discard(stream)
        if not stream.crossing:
            stream.crossing = True
            for event in stream.events:
                self._forward(event)

    async def settle(self) -> None:
        """Until every run started so far has been looked at once."""
        await self._starting.join()

    async def watch(self) -> None:
        """Look at the runs that start, all that started since the last look in one trip to
        Redis; every RECHECK_EVERY, at those still unfollowed. When Redis cannot tell, their
        events go across."""
        loop = asyncio.get_running_loop()
        recheck = loop.time() + RECHECK_EVERY
        while True:
            streams: list[RunStream] = []
            try:
                async with asyncio.timeout(max(recheck - loop.time(), 0)):
                    streams.append(await self._starting.get())
            except TimeoutError:
                pass
            while not self._starting.empty():
                streams.append(self._starting.get_nowait())
            new = len(streams)
            if loop.time() >= recheck:  # however busy with new runs, the old ones' turn
                streams += [s for s in self._unfollowed if s not in streams]
                recheck = loop.time() + RECHECK_EVERY
            try:
                await self._look(streams)
            finally:
                for _ in range(new):
                    self._starting.task_done()

    async def _look(self, streams: list[RunStream]) -> None:
        if not streams:
            return
        try:
            found = await self.registry.elsewhere([s.session_id for s in streams])
        except Exception:
            if being_cancelled():
                raise asyncio.CancelledError from None
            log.exception("could not tell who follows the sessions of runs streaming here")
            found = [True] * len(streams)
        for stream, followed in zip(streams, found, strict=True):
            if followed:
                self.send_across(stream)
            elif stream.finished:  # looked at once more after its end: done with
                self._unfollowed.discard(stream)
            else:
                self._unfollowed.add(stream)
