"""`manage.py import_agno --db URL`: an Agno database's sessions into Parley, then a report."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from sessions_app.agno_import import (
    DEFAULT_PREFIX,
    MappingError,
    SourceError,
    UserMapping,
    import_agno,
    read_user_map,
    username_problem,
)


def _since(value: str) -> datetime:
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"--since takes a date like 2025-01-31, not {value!r}.") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Import the sessions of an Agno database (Agno 2.x `agno_sessions` or 1.x "
        "`agent_sessions`), read-only, with their runs and messages. Safe to run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--db", required=True, help="A SQLite file (sqlite:///path) or a postgres:// URL."
        )
        parser.add_argument(
            "--table", help="Default: agno_sessions, else agent_sessions (also in schema ai)."
        )
        parser.add_argument("--since", help="Only sessions updated on or after this date (UTC).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Read and report; write nothing."
        )
        self._user_arguments(parser)

    def _user_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--source",
            help="The name under which this database's users' accounts are remembered, so the "
            "next import of it finds them (default: the database's location and the table). "
            "Give the same NAME when importing the database from another place.",
        )
        parser.add_argument(
            "--map-user",
            action="append",
            default=[],
            metavar="AGNO_ID=USERNAME",
            help="Give Agno user AGNO_ID's sessions to the existing account USERNAME "
            "(repeatable; remembered for later imports of the source).",
        )
        parser.add_argument(
            "--map-users",
            action="append",
            default=[],
            metavar="FILE.csv",
            help="The same from a CSV file of two columns, agno_id,username (a header allowed).",
        )
        parser.add_argument(
            "--user-prefix",
            default=DEFAULT_PREFIX,
            help="An Agno user met for the first time gets a new inactive account PREFIX+id "
            f"(default {DEFAULT_PREFIX!r}: sign-up refuses ':', so no one can take it first).",
        )
        parser.add_argument(
            "--allow-staff-users",
            action="store_true",
            help="Let sessions go to a staff or superuser account: one named by --map-user, or "
            "one an Agno user was given by an earlier import and that became staff since.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = _since(options["since"]) if options["since"] else None
        prefix = options["user_prefix"]
        if prefix and username_problem(prefix):
            raise CommandError(f"--user-prefix {prefix!r}: {username_problem(prefix)}")
        try:
            users = UserMapping(
                prefix=prefix,
                allow_staff=options["allow_staff_users"],
                explicit=read_user_map(options["map_user"], options["map_users"]),
            )
            report = import_agno(
                options["db"],
                table=options["table"],
                since=since,
                dry_run=options["dry_run"],
                users=users,
                source_name=options["source"],
                progress=self._bar,
            )
        except (SourceError, MappingError) as exc:
            raise CommandError(str(exc)) from None
        for line in report.lines():
            self.stdout.write(line)

    def _bar(self, rows: Iterable[dict[str, Any]], total: int) -> Iterator[dict[str, Any]]:
        # The bar writes to the real stderr stream: Django's wrapper would add a newline to
        # each of its redraws.
        bar_file: TextIO = getattr(self.stderr, "_out", sys.stderr)
        yield from tqdm(rows, total=total, unit="session", file=bar_file, desc="import")
