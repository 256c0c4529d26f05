"""The engine's database work: in the ORM's one thread, batched across runs.

Every run's rows are written from the event loop through `sync_to_async`, whose calls all queue
on one thread. A `Batcher` hands that thread everything submitted while its previous call ran,
so any number of runs starting (or saving, or finishing) together cost one hop and one
transaction instead of one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
T = TypeVar("T")


def in_db_thread(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """`fn` in the ORM's thread, keeping that thread's connection open from one call to the next.

    channels' database_sync_to_async closes it around every call when CONN_MAX_AGE is 0: a new
    connection per batch, and on SQLite a WAL checkpoint each time. A connection that failed, or
    (with health checks, as Django checks one per request) that the server closed meanwhile,
    is replaced first, so a database restart fails no call that comes after it.
    """

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        for conn in connections.all(initialized_only=True):
            check = conn.errors_occurred or conn.health_check_enabled
            if conn.connection is not None and check and not conn.is_usable():
                conn.close()
        return fn(*args, **kwargs)

    return sync_to_async(call, thread_sensitive=True)


class Starts:
    """Runs being started in one event loop: a batch being written (keyed by its batcher), or
    launched and waiting for the model's first piece (keyed by run id). Each time some begin
    after none were, a new round."""

    def __init__(self) -> None:
        self.keys: set[Hashable] = set()
        self.round = 0
        self.none = asyncio.Event()
        self.none.set()

    def add(self, key: Hashable) -> None:
        if not self.keys:
            self.round += 1
            self.none.clear()
        self.keys.add(key)

    def done(self, key: Hashable) -> None:
        self.keys.discard(key)
        if not self.keys:
            self.none.set()

    async def wait(self, limit: float) -> None:
        """Until none are starting, `limit` seconds at most."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                await self.none.wait()


class Batcher:
    """Runs `fn` in the ORM thread on everything submitted while its previous call ran.

    `fn` returns each item's result or the exception that refused it. `then`, if given, is
    applied to each result on the event loop, even when its submitter has gone; `after` is given
    each batch's items once their outcomes are handed out; with a `tracker`, each batch counts as
    a start while it is in the thread.
    """

    LIMIT = 500

    def __init__(
        self,
        fn: Callable[[list[Any]], list[Any]],
        then: Callable[[Any], Any] | None = None,
        after: Callable[[list[Any]], None] | None = None,
        tracker: Starts | None = None,
    ) -> None:
        self.fn = fn
        self.then = then
        self.after = after
        self.tracker = tracker
        self.waiting: list[tuple[Any, asyncio.Future[Any]]] = []
        self.worker: asyncio.Task[None] | None = None

    async def submit(self, item: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append((item, future))
        if self.worker is None:
            self.worker = asyncio.create_task(self.work(), context=contextvars.Context())
        return await future

    async def work(self) -> None:
        try:
            while self.waiting:
                batch, self.waiting = self.waiting[: self.LIMIT], self.waiting[self.LIMIT :]
                items = [item for item, _ in batch]
                outcomes = await self._call(items, batch)
                try:
                    self._hand_out(batch, outcomes)
                finally:
                    if self.after is not None:
                        self.after(items)
        finally:
            self.worker = None

    async def _call(self, items: list[Any], batch: list[tuple[Any, asyncio.Future[Any]]]) -> Any:
        if self.tracker is not None:
            self.tracker.add(self)  # one batch at a time is in the thread
        try:
            return await in_db_thread(self.fn)(items)
        except asyncio.CancelledError:
            for _, future in batch + self.waiting:
                future.cancel()
            self.waiting = []
            raise
        except Exception as exc:
            return [exc] * len(items)
        finally:
            if self.tracker is not None:
                self.tracker.done(self)

    def _hand_out(self, batch: list[tuple[Any, asyncio.Future[Any]]], outcomes: Any) -> None:
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Exception):
                if not future.done():
                    future.set_exception(outcome)
                continue
            if self.then is not None:
                # A created run starts even when its asker has gone (a closed socket): the
                # question was stored, so its answer is owed.
                outcome = self.then(outcome)
            if not future.done():
                future.set_result(outcome)
