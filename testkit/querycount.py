"""Count SQL statements and the rows they write, from every thread (async ORM calls run in a
worker thread). Used by the tests and by the benchmark's figure 3."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.backends.utils import CursorWrapper

_WRITES = ("INSERT", "UPDATE", "DELETE")
_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT")


@dataclass
class Counted:
    statements: list[str] = field(default_factory=list)
    # Which thread sent each statement, and when (ms into the window), for failure messages.
    origins: list[str] = field(default_factory=list)
    rows_written: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = field(default_factory=time.monotonic)

    def record(self, sql: str, rowcount: int) -> None:
        verb = sql.lstrip()[:6].upper()
        if verb == "INSERT" and rowcount < 1:
            # An INSERT … RETURNING reports no rowcount on SQLite: count its VALUES tuples.
            rowcount = sql.count("), (") + 1
        origin = (
            f"{threading.current_thread().name} +{(time.monotonic() - self.started) * 1000:.0f} ms"
        )
        with self.lock:
            self.statements.append(sql)
            self.origins.append(origin)
            if verb in _WRITES:
                self.rows_written += max(rowcount, 0)

    @property
    def total(self) -> int:
        return len(self.statements)

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

    def described(self) -> str:
        """One statement a line, with its thread and time: what a failed count should show."""
        return "\n".join(
            f"{origin}: {sql[:200]}"
            for origin, sql in zip(self.origins, self.statements, strict=True)
        )


@contextlib.contextmanager
def count_queries() -> Iterator[Counted]:
    """Every statement sent while the block runs, a failed one too."""
    counted = Counted()
    original_execute = CursorWrapper.execute
    original_executemany = CursorWrapper.executemany

    def execute(self: CursorWrapper, sql: Any, params: Any = None) -> Any:
        try:
            return original_execute(self, sql, params)
        finally:
            counted.record(str(sql), self.cursor.rowcount)

    def executemany(self: CursorWrapper, sql: Any, param_list: Any) -> Any:
        try:
            return original_executemany(self, sql, param_list)
        finally:
            counted.record(str(sql), self.cursor.rowcount)

    CursorWrapper.execute = execute  # type: ignore[method-assign]
    CursorWrapper.executemany = executemany  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        CursorWrapper.execute = original_execute  # type: ignore[method-assign]
        CursorWrapper.executemany = original_executemany  # type: ignore[method-assign]
