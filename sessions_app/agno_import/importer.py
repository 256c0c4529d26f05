"""An Agno database into Parley: each session read, parsed and stored on its own, so one bad
row is reported and the others still come in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction

from sessions_app.agno_import.identities import Directory, UserMapping, named_accounts
from sessions_app.agno_import.parse import Skip, parse_row
from sessions_app.agno_import.report import Report
from sessions_app.agno_import.source import Source, SourceError, Table, open_source
from sessions_app.agno_import.store import Stored, store_session
from sessions_app.models import ImportedIdentity

log = logging.getLogger("parley.agno_import")

DEFAULT_USERS = UserMapping()
SOURCE_MAX = ImportedIdentity._meta.get_field("source").max_length
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
    users: UserMapping = DEFAULT_USERS,
    source_name: str | None = None,
    progress: Progress = lambda rows, total: iter(rows),
) -> Report:
    """Import every agent session of the Agno table at `url` (read-only there). Its users'
    accounts are remembered under `source_name`, by default the database's location and the
    table's name."""
    named = named_accounts(users)  # a mistake in the mapping stops the import before it starts
    source = open_source(url)
    try:
        found = source.find_table(table)
        directory = Directory(_source_name(source_name, source, found), users, named)
        report = Report(
            layout=found.layout, table=found.name, source=directory.source, dry_run=dry_run
        )
        # Closed before the source, also when the import stops early (Ctrl-C).
        with closing(source.rows(found)) as rows:
            for row in progress(rows, source.count(found)):
                report.read += 1
                _one(row, found.layout, since, dry_run, directory, report)
    finally:
        source.close()
    return report


def _source_name(given: str | None, source: Source, table: Table) -> str:
    name = given.strip() if given is not None else f"{source.location}#{table.name}"
    if not name or len(name) > SOURCE_MAX:
        raise SourceError(
            f"The source name {name!r} is empty or longer than {SOURCE_MAX} characters: "
            "give a shorter one with --source NAME."
        )
    return name


def _one(
    row: dict[str, Any],
    layout: str,
    since: datetime | None,
    dry_run: bool,
    directory: Directory,
    report: Report,
) -> None:
    session_id = row.get("session_id")
    try:
        parsed = parse_row(row, layout)
        if since is not None and parsed.updated_at < since:
            raise Skip("not updated since --since", "since")
        stored = _store(parsed, dry_run, directory)
    except Skip as skip:
        report.skip(session_id, skip.kind, skip.reason)
        return
    except DatabaseError as exc:
        log.warning("session %s could not be stored: %s", session_id, exc)
        report.skip(session_id, "error", f"could not be stored ({exc})")
        return
    report.add(stored)


def _store(parsed: Any, dry_run: bool, directory: Directory) -> Stored:
    if not dry_run:
        return store_session(parsed, directory)
    try:
        with transaction.atomic():
            raise DryRun(store_session(parsed, directory))
    except DryRun as undone:
        return undone.stored
