"""How much memory a measured piece of work took, from inside the process doing it."""

from __future__ import annotations

import gc
import os
import resource
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def rise(trace: bool) -> Iterator[dict[str, int]]:
    """How far the process's peak memory rose above what it held warmed up (`rss_growth`), and
    with `trace` the Python heap's peak (`heap`; tracemalloc slows Python down: such a run is
    not timed)."""
    gc.collect()
    found = {"before": _rss()}
    if trace:
        tracemalloc.start()
    try:
        yield found
    finally:
        if trace:
            found["heap"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        found["rss_growth"] = max(_peak_rss() - found.pop("before"), 0)
