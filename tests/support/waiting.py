"""Waiting, in async tests, for what another task, thread or process does.

A test asserts on an event once it has happened, however long a loaded machine takes; the bound
only turns a hang into a failure that says what never came.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable


async def until(
    condition: Callable[[], bool | Awaitable[bool]], what: str, timeout: float = 10.0
) -> None:
    """Poll `condition` (sync or async) while this loop keeps running the work it waits for."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        met = condition()
        if inspect.isawaitable(met):
            met = await met
        if met:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.01)
