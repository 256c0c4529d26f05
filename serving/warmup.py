"""What a worker opens before it listens: its database connections (the engine's thread and
every request thread), its connections to Redis, one to the model's endpoint, and the
database's clock. The first burst after a start or a restart then finds them open, as the
second does, and serve calls a worker ready only once it listens."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from django.db import connection

from serving import tuning
from sessions_app import dbclock, events
from sessions_app.engine.dbthread import in_db_thread
from sessions_app.llm import client as llm

log = logging.getLogger("parley.serve")


# However slow a part (a database host that does not answer), the worker listens after this.
PATIENCE = 10.0


async def warm() -> None:
    """Open everything, side by side; what cannot be opened in PATIENCE is logged, and opened
    when it is first needed."""
    parts: dict[str, Awaitable[object]] = {
        "the database (and its clock)": in_db_thread(dbclock.measure)(),
        "the request threads' database connections": _request_threads(),
        "Redis": events.warm(),
        "the model's endpoint": _model(),
    }
    tasks = {name: asyncio.ensure_future(part) for name, part in parts.items()}
    await asyncio.wait(tasks.values(), timeout=PATIENCE)
    for name, task in tasks.items():
        if not task.done():
            log.warning("%s did not open within %g s; listening anyway", name, PATIENCE)
        elif task.exception() is not None:
            log.warning("could not open %s before listening: %s", name, task.exception())


async def _request_threads() -> None:
    threads = tuning.request_threads  # set as the application loaded, when tuned so
    if threads is not None:
        await asyncio.gather(*map(asyncio.wrap_future, threads.submit_to_each(_connect)))


def _connect() -> None:
    connection.ensure_connection()  # `connection` is the calling thread's: looked up here


async def _model() -> None:
    if not await llm.ping():
        raise ConnectionError(f"{llm.base_url()} did not answer")
