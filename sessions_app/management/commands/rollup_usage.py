from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from sessions_app.usage import closed_before, fill

# Days rolled up per transaction, so a long backfill holds its claims briefly.
CHUNK = 30


class Command(BaseCommand):
    help = (
        "Roll up the last N closed days (days before yesterday, UTC) not rolled up yet, ahead "
        "of the dashboard, which would otherwise do it when it first reads them."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--days", type=int, default=180, help="How far back to go (default 180: the 90-day "
            "preset and the period before it)."
        )  # fmt: skip

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        if days < 1:
            raise CommandError("--days must be at least 1.")
        until = closed_before(timezone.now())
        wanted = [until - timedelta(days=i) for i in range(days, 0, -1)]
        rolled = sum(fill(wanted[i : i + CHUNK]) for i in range(0, len(wanted), CHUNK))
        self.stdout.write(
            f"Rolled up {rolled} day(s) from {wanted[0]} to {wanted[-1]}; "
            f"{len(wanted) - rolled} already were."
        )
