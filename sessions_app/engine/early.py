"""A run's request to the model, sent while the run's rows are still being written.

The model's first piece is read ahead and held until the run starts (after the commit), so the
user never sees an answer to a question that was not stored; the rest of the stream waits in
the connection. Writing the rows and the model's time to its first token overlap instead of
adding up.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator
from typing import Any

from sessions_app.engine.live import LiveRun
from sessions_app.llm import client as llm


class EarlyRequest:
    def __init__(
        self,
        model: str,
        messages: list[dict[str, Any]],
        offered: list[Any],
        sampling: dict[str, Any],
    ) -> None:
        self.started = time.perf_counter()
        self.stream = llm.stream_chat(model, messages, offered or None, sampling)
        self.first = asyncio.get_running_loop().create_task(
            self._read_first(), context=contextvars.Context()
        )
        self.first.add_done_callback(_retrieve_exception)

    async def _read_first(self) -> Any:
        return await anext(self.stream)

    async def items(self) -> AsyncIterator[Any]:
        try:
            try:
                item = await self.first
            except StopAsyncIteration:
                return
            yield item
            async for item in self.stream:
                yield item
        finally:
            await self.stream.aclose()

    def cancel(self) -> None:
        """Its run was not created: close the request."""
        if not self.first.done():
            self.first.cancel()  # raised inside the stream, which closes its response
        else:
            asyncio.get_running_loop().create_task(self.stream.aclose())


def _retrieve_exception(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # seen by whoever awaits it; no "never retrieved" warning meanwhile


# A created run's request: its run, model, messages, tools and sampling settings.
Request = tuple[LiveRun, str, list[dict[str, Any]], list[Any], dict[str, Any]]


def send_from_thread(loop: asyncio.AbstractEventLoop, requests: list[Request]) -> None:
    """From the database thread, mid-creation: send these runs' model requests now."""

    def send() -> None:
        for live, model, messages, offered, sampling in requests:
            if live.early is not None:  # sent by a creation that failed, tried again
                live.early.cancel()
            live.early = EarlyRequest(model, messages, offered, sampling)

    try:
        loop.call_soon_threadsafe(send)
    except RuntimeError:  # the loop is closing: the runs will not start either
        pass


def claim(live: LiveRun) -> EarlyRequest | None:
    early, live.early = live.early, None
    return early


def drop_unclaimed(runs: list[LiveRun]) -> None:
    """After a creation batch: requests whose runs were not created (a conflict, a refusal, an
    error) are closed."""
    for live in runs:
        unclaimed = claim(live)
        if unclaimed is not None:
            unclaimed.cancel()
