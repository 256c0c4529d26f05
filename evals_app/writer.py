"""Answers written in batches as they come: whatever ended while the last batch was being
written goes next, in one transaction (evals_app.store.write_answers)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from evals_app import store
from sessions_app.engine.dbthread import in_db_thread as db

log = logging.getLogger("parley.evals")


class AnswerWriter:
    """A trial's task waits for its answer to be written (so a run ends once every answer is),
    but not in its slot: holding the slot through the write cost a third of the throughput.
    A cancelled task's answer is written anyway. A write that fails (the database away) is
    kept as `failure`: the run stops, and its trials are asked again later."""

    def __init__(self, experiment_id: Any, written: Callable[[list[store.Answer]], None]) -> None:
        self.experiment_id = experiment_id
        self.written = written
        self.waiting: list[tuple[store.Answer, asyncio.Future[None]]] = []
        self.task: asyncio.Task[None] | None = None
        self.failure: DatabaseError | None = None

    async def write(self, answer: store.Answer) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append((answer, done))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._flush())
        await asyncio.shield(done)

    async def drained(self) -> None:
        """Once everything handed over is written; a failed write raised."""
        while self.task is not None and not self.task.done():
            await asyncio.wait([self.task])
        if self.failure is not None:
            raise self.failure

    async def _flush(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting, []
            answers = [answer for answer, _ in batch]
            try:
                await db(store.write_answers)(self.experiment_id, answers)
            except DatabaseError as exc:
                log.error("experiment %s: answers not written: %s", self.experiment_id, exc)
                self.failure = exc
            else:
                self.written(answers)
            finally:  # whatever happened, nobody waits for this batch forever
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
