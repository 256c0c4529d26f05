"""An Agno database into Parley: each session read, parsed and stored on its own, so one bad
row is reported and the others still come in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction

from sessions_app.services.agno_import.parse import Skip, parse_row
from sessions_app.services.agno_import.report import Report
from sessions_app.services.agno_import.source import open_source
from sessions_app.services.agno_import.store import Stored, UserMapping, store_session

log = logging.getLogger("parley.agno_import")

AS_THEY_ARE = UserMapping()
Progress = Callable[[Iterable[dict[str, Any]], int], Iterator[dict[str, Any]]]


class DryRun(Exception):
    """Raised inside a session's transaction to undo it, once counted."""

    def __init__(self, stored: Stored) -> None:
        self.stored = stored


def import_agno(
    url: str,
    *,
    table: str | None = None,
    since: datetime | None = None,
    dry_run: bool = False,
    users: UserMapping = AS_THEY_ARE,
    progress: Progress = lambda rows, total: iter(rows),
) -> Report:
    """Import every agent session of the Agno table at `url` (read-only there)."""
    source = open_source(url)
    try:
        found = source.find_table(table)
        report = Report(layout=found.layout, table=found.name, dry_run=dry_run)
        # Closed before the source, also when the import stops early (Ctrl-C).
        with closing(source.rows(found)) as rows:
            for row in progress(rows, source.count(found)):
                report.read += 1
                _one(row, found.layout, since, dry_run, users, report)
    finally:
        source.close()
    return report


def _one(
    row: dict[str, Any],
    layout: str,
    since: datetime | None,
    dry_run: bool,
    users: UserMapping,
    report: Report,
) -> None:
    session_id = row.get("session_id")
    try:
        parsed = parse_row(row, layout)
        if since is not None and parsed.updated_at < since:
            raise Skip("not updated since --since", "since")
        stored = _store(parsed, dry_run, users)
    except Skip as skip:
        report.skip(session_id, skip.kind, skip.reason)
        return
    except DatabaseError as exc:
        log.warning("session %s could not be stored: %s", session_id, exc)
        report.skip(session_id, "error", f"could not be stored ({exc})")
        return
    report.add(stored)


def _store(parsed: Any, dry_run: bool, users: UserMapping) -> Stored:
    if not dry_run:
        return store_session(parsed, users)
    try:
        with transaction.atomic():
            raise DryRun(store_session(parsed, users))
    except DryRun as undone:
        return undone.stored
