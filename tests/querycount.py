"""Count SQL statements from every thread (async ORM calls run in a worker thread)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db.backends.utils import CursorWrapper


@dataclass
class Counted:
    statements: list[str] = field(default_factory=list)
    # Which thread sent each statement, and when (ms into the window), for failure messages.
    origins: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return len(self.statements)

    @property
    def writes(self) -> int:
        verbs = ("INSERT", "UPDATE", "DELETE")
        return sum(1 for sql in self.statements if sql.lstrip().upper().startswith(verbs))

    def described(self) -> str:
        """One statement a line, with its thread and time: what a failed count should show."""
        return "\n".join(
            f"{origin}: {sql[:200]}"
            for origin, sql in zip(self.origins, self.statements, strict=True)
        )

    def add(self, sql: str) -> None:
        origin = (
            f"{threading.current_thread().name} +{(time.monotonic() - self.started) * 1000:.0f} ms"
        )
        with self.lock:
            self.statements.append(str(sql))
            self.origins.append(origin)


@contextlib.contextmanager
def count_queries() -> Iterator[Counted]:
    counted = Counted()
    original_execute = CursorWrapper.execute
    original_executemany = CursorWrapper.executemany

    def execute(self, sql, params=None):
        counted.add(sql)
        return original_execute(self, sql, params)

    def executemany(self, sql, param_list):
        counted.add(sql)
        return original_executemany(self, sql, param_list)

    CursorWrapper.execute = execute
    CursorWrapper.executemany = executemany
    try:
        yield counted
    finally:
        CursorWrapper.execute = original_execute
        CursorWrapper.executemany = original_executemany
