"""Whether the model endpoint is reachable, as /healthz reports it: one probe per endpoint every
PARLEY_HEALTHZ_CACHE_SECONDS in this process, shared by every caller meanwhile, so anonymous
callers cannot turn /healthz into a stream of requests to the model's server."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from django.conf import settings

from sessions_app.llm import client


@dataclass
class _Probe:
    endpoint: str
    started: float
    # A thread-safe future: callers on other event loops (a test client's, sync views') share it.
    outcome: Future[bool] = field(default_factory=Future)


_lock = threading.Lock()
_latest: _Probe | None = None


def _endpoint() -> str:
    return settings.LLM_BASE_URL or ""


async def reachable() -> bool:
    """The latest probe's answer while it is fresh (or in flight), else a new probe's."""
    global _latest
    endpoint, now = _endpoint(), time.monotonic()
    with _lock:
        probe = _latest
        stale = (
            probe is None
            or probe.endpoint != endpoint
            or now - probe.started >= settings.PARLEY_HEALTHZ_CACHE_SECONDS
        )
        if stale:
            probe = _latest = _Probe(endpoint, now)
    if stale:
        await _run(probe)
    return await asyncio.wrap_future(probe.outcome)


async def _run(probe: _Probe) -> None:
    global _latest
    try:
        probe.outcome.set_result(await client.ping())
    except BaseException:
        # The asker went away mid-probe: those waiting hear "unreachable", the next caller probes.
        with _lock:
            if _latest is probe:
                _latest = None
        probe.outcome.set_result(False)
        raise
