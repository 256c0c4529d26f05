"""Count SQL statements and the rows they write, from every thread (the async ORM runs in one)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.backends.utils import CursorWrapper

_WRITES = ("INSERT", "UPDATE", "DELETE")
_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT")


@dataclass
class Counted:
    statements: list[str] = field(default_factory=list)
    rows_written: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, sql: str, rowcount: int) -> None:
        verb = sql.lstrip()[:6].upper()
        if verb == "INSERT" and rowcount < 1:
            # An INSERT … RETURNING reports no rowcount on SQLite: count its VALUES tuples.
            rowcount = sql.count("), (") + 1
        with self.lock:
            self.statements.append(sql)
            if verb in _WRITES:
                self.rows_written += max(rowcount, 0)

    @property
    def queries(self) -> int:
        """Statements that read or write data; transaction control is not a query."""
        return sum(1 for sql in self.statements if not sql.lstrip().upper().startswith(_CONTROL))

    @property
    def writes(self) -> int:
        return sum(1 for sql in self.statements if sql.lstrip().upper().startswith(_WRITES))

    @property
    def checkpoints(self) -> int:
        """The engine's partial saves: an UPDATE of a run's content that leaves its status."""
        return sum(
            1
            for sql in self.statements
            if sql.lstrip().upper().startswith("UPDATE")
            and '"sessions_app_run"' in sql
            and '"content_seq"' in sql
            and '"status" =' not in sql.split("WHERE")[0]
        )


@contextlib.contextmanager
def count_queries() -> Iterator[Counted]:
    counted = Counted()
    original_execute = CursorWrapper.execute
    original_executemany = CursorWrapper.executemany

    def execute(self: CursorWrapper, sql: Any, params: Any = None) -> Any:
        result = original_execute(self, sql, params)
        counted.record(str(sql), self.cursor.rowcount)
        return result

    def executemany(self: CursorWrapper, sql: Any, param_list: Any) -> Any:
        result = original_executemany(self, sql, param_list)
        counted.record(str(sql), self.cursor.rowcount)
        return result

    CursorWrapper.execute = execute  # type: ignore[method-assign]
    CursorWrapper.executemany = executemany  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        CursorWrapper.execute = original_execute  # type: ignore[method-assign]
        CursorWrapper.executemany = original_executemany  # type: ignore[method-assign]
