"""How often a streaming answer is sent and saved, as the load grows.

Every piece costs the same to send whatever its size: a process streaming hundreds of answers
at a few tokens a piece would spend its CPU on frames. So pieces are merged, at an interval that
grows with the number of answers streaming, within a bound that still reads as a steady flow;
partial answers are saved less often in step.

For the pieces, what counts is the server's load on its host, not one process's: the workers
of `serve --workers N` share the host's cores, and each piece they send crosses nginx too. A
worker counts its answers N times (PARLEY_WORKERS), nginx spreading streams evenly over the N.
The saves go by the process's own answers: what a process dying loses stays as bounded as one
process's load keeps it, however many workers the host runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from django.conf import settings

from sessions_app.events.stream import RunStream


def _steps(runs: int) -> float:
    """How many steps of PARLEY_COALESCE_RUNS `runs` streaming answers make."""
    return runs / max(settings.PARLEY_COALESCE_RUNS, 1)


def coalesce_interval(streaming: int) -> float:
    """Seconds between two pieces of one answer while `streaming` runs stream in this process,
    and as many in each of the host's other workers."""
    base = settings.PARLEY_COALESCE_INTERVAL
    stretched = base * _steps(streaming * max(settings.PARLEY_WORKERS, 1))
    return min(max(base, stretched), max(base, settings.PARLEY_COALESCE_MAX_INTERVAL))


def checkpoint_interval(streaming: int) -> float:
    """Seconds between two saves of one partial answer: each costs the database as much as a
    whole answer."""
    return settings.PARLEY_CHECKPOINT_INTERVAL * max(1.0, _steps(streaming))


class Coalescer:
    """Publishes the first delta at once, then at most one merged piece per interval.

    A piece held back counts as sent when its interval was up, not when the timer ran (always a
    little later): otherwise a model streaming at the interval's own pace falls further behind
    with every piece.
    """

    def __init__(self, stream: RunStream, streaming: Callable[[], int]) -> None:
        self.stream = stream
        self.streaming = streaming  # how many answers this process streams now
        self.pending: list[str] = []
        self.last_flush: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.clock = time.monotonic

    def add(self, piece: str) -> None:
        self.pending.append(piece)
        if self.timer is not None:
            return
        now = self.clock()
        interval = coalesce_interval(self.streaming())
        if self.last_flush is None or now - self.last_flush >= interval:
            self.flush()
        else:
            due = self.last_flush + interval
            self.timer = asyncio.get_running_loop().call_later(due - now, self.flush, due)

    def flush(self, due: float | None = None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.pending:
            self.stream.publish("RunContent", content="".join(self.pending))
            self.pending = []
            self.last_flush = self.clock() if due is None else due
