"""Reading an Agno sessions table, read-only, from a SQLite file or a PostgreSQL database.

Agno 2.x keeps one row per session in `agno_sessions` (runs in `runs`); Agno 1.x's
SqliteStorage and PostgresStorage keep `agent_sessions` (runs inside `memory`). Rows come out as
plain dicts of column values; the JSON in them is decoded later (parse.py), row by row, so one bad
row is reported instead of stopping the import.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.rows import dict_row

# Agno's PostgresDb and PostgresStorage put their tables in the schema "ai" by default.
DEFAULT_TABLES = ("agno_sessions", "ai.agno_sessions", "agent_sessions", "ai.agent_sessions")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
BATCH = 200


class SourceError(Exception):
    """The database or the table cannot be read; the message says why."""


@dataclass(frozen=True)
class Table:
    name: str
    layout: str  # "2.x": `runs` column; "1.x": `memory` column
    columns: frozenset[str]


class Source:
    """An open, read-only connection to an Agno database. `location` names the database
    without credentials: a SQLite file's absolute path, a PostgreSQL server's host, port and
    database as the connection resolved them."""

    def __init__(self, connection: Any, vendor: str, location: str) -> None:
        self.connection = connection
        self.vendor = vendor
        self.location = location

    def find_table(self, wanted: str | None) -> Table:
        names = [wanted] if wanted else list(DEFAULT_TABLES)
        for name in names:
            if not _NAME.fullmatch(name):
                raise SourceError(f"Not a table name: {name!r}.")
            columns = self._columns(name)
            if "runs" in columns:
                return Table(name, "2.x", columns)
            if "memory" in columns:
                return Table(name, "1.x", columns)
            if columns and wanted:
                raise SourceError(f"Table {name} has neither `runs` (Agno 2.x) nor `memory` (1.x).")
        tried = ", ".join(names)
        raise SourceError(f"No Agno sessions table found (looked for {tried}).")

    def count(self, table: Table) -> int:
        with self._cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) AS n FROM {_quoted(table.name)}")
            row = cursor.fetchone()
        return int(row["n"] if isinstance(row, dict) else row[0])

    def rows(self, table: Table) -> Generator[dict[str, Any], None, None]:
        """Every row, oldest session first."""
        order = "created_at, session_id" if "created_at" in table.columns else "session_id"
        with self._cursor() as cursor:
            cursor.execute(f"SELECT * FROM {_quoted(table.name)} ORDER BY {order}")
            while batch := cursor.fetchmany(BATCH):
                yield from (dict(row) for row in batch)

    def close(self) -> None:
        self.connection.close()

    def _columns(self, name: str) -> frozenset[str]:
        try:
            with self._cursor() as cursor:
                cursor.execute(f"SELECT * FROM {_quoted(name)} WHERE 1 = 0")
                return frozenset(d[0] for d in cursor.description)
        except (sqlite3.Error, psycopg.Error):
            if self.vendor == "postgresql":
                self.connection.rollback()
            return frozenset()

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        cursor = self.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


def _quoted(name: str) -> str:
    return ".".join(f'"{part}"' for part in name.split("."))


def open_source(url: str) -> Source:
    """`url` is a SQLite path (`sqlite:///path`, or a plain file name) or a PostgreSQL URL
    (`postgres://`, `postgresql://`, also SQLAlchemy's `postgresql+psycopg://` as Agno takes)."""
    scheme = urlsplit(url).scheme.split("+")[0].lower()
    if scheme in ("postgres", "postgresql"):
        return _postgres(url)
    if scheme in ("", "sqlite", "file") or len(scheme) == 1:  # a Windows drive letter
        return _sqlite(url)
    raise SourceError(
        f"Unsupported database URL {redacted(url)!r}: give a SQLite file or postgres:// URL."
    )


def redacted(url: str) -> str:
    """`url` with its password (if any) masked, fit for a message or a log line."""
    parts = urlsplit(url)
    if not parts.netloc or parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return parts._replace(netloc=f"{name}:***@{host}").geturl()


def _sqlite(url: str) -> Source:
    if url.startswith("sqlite:///"):  # sqlite:///relative/path or sqlite:////absolute/path
        path = Path(unquote(url[len("sqlite:///") :]))
    elif url.startswith("file:"):
        path = Path(unquote(urlsplit(url).path))
    else:
        path = Path(url)
    if not path.is_file():
        raise SourceError(f"No SQLite file at {path}.")
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return Source(connection, "sqlite", f"sqlite:///{path.resolve()}")


def _masked(text: str, url: str) -> str:
    """`text` without the URL's password: libpq quotes the part of a URL it cannot parse."""
    raw = urlsplit(url).netloc.rpartition("@")[0].partition(":")[2]
    for secret in sorted({raw, unquote(raw)} - {""}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _postgres(url: str) -> Source:
    _, rest = url.split("://", 1)
    try:
        connection = psycopg.connect(f"postgresql://{rest}", row_factory=dict_row)
    except psycopg.Error as exc:
        raise SourceError(f"Cannot connect to {redacted(url)}: {_masked(str(exc), url)}") from exc
    connection.read_only = True
    info = connection.info
    return Source(connection, "postgresql", f"postgresql://{info.host}:{info.port}/{info.dbname}")
