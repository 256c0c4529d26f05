"""Count SQL statements from every thread (async ORM calls run in a worker thread)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db.backends.utils import CursorWrapper


@dataclass
class Counted:
    statements: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def total(self) -> int:
        return len(self.statements)

    @property
    def writes(self) -> int:
        verbs = ("INSERT", "UPDATE", "DELETE")
        return sum(1 for sql in self.statements if sql.lstrip().upper().startswith(verbs))


@contextlib.contextmanager
def count_queries() -> Iterator[Counted]:
    counted = Counted()
    original_execute = CursorWrapper.execute
    original_executemany = CursorWrapper.executemany

    def execute(self, sql, params=None):
        with counted.lock:
            counted.statements.append(str(sql))
        return original_execute(self, sql, params)

    def executemany(self, sql, param_list):
        with counted.lock:
            counted.statements.append(str(sql))
        return original_executemany(self, sql, param_list)

    CursorWrapper.execute = execute
    CursorWrapper.executemany = executemany
    try:
        yield counted
    finally:
        CursorWrapper.execute = original_execute
        CursorWrapper.executemany = original_executemany
