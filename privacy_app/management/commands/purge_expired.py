"""Delete the sessions past their retention period (PARLEY_RETENTION_DAYS, or their agent's),
except those staff keep: meant for cron, e.g. nightly."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from audit_app.models import Action
from audit_app.record import record
from privacy_app import retention


class Command(BaseCommand):
    help = "Delete sessions past their retention period (not those kept), in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count, delete nothing.")
        parser.add_argument(
            "--batch",
            type=int,
            default=retention.BATCH_MESSAGES,
            help="Messages deleted per transaction (default %(default)s).",
        )
        parser.add_argument(
            "--pause",
            type=float,
            default=None,
            help="Seconds between batches (default: three times what the batch took, so the "
            "chats going on keep at least three quarters of the database's time).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        expired = retention.expired()
        found = retention.count(expired)
        if options["dry_run"]:
            self.stdout.write(
                f"Would delete {found.sessions} sessions ({found.runs} runs, "
                f"{found.messages} messages) past their retention period."
            )
            return
        bar = tqdm(total=found.messages, unit="msg", disable=None, file=self.stderr)
        seen = [0]

        def progress(done: retention.Purged) -> None:
            bar.update(done.messages - seen[0])
            seen[0] = done.messages

        purged = retention.purge(
            expired, batch=options["batch"], pause=options["pause"], progress=progress
        )
        bar.close()
        if purged.sessions:
            record(
                None,
                Action.PURGE,
                f"Purged {purged.sessions} expired sessions",
                details=vars(purged),
            )
        self.stdout.write(
            f"Deleted {purged.sessions} sessions ({purged.runs} runs, {purged.messages} "
            f"messages) in {purged.batches} batches."
        )
