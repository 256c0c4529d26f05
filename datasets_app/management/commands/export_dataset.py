"""`manage.py export_dataset`: a dataset's accepted items in a training format, to a file or
to stdout (which then carries the data alone), checked first, with its dataset card."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from datasets_app.export import FORMATS, card, check
from datasets_app.export.checks import Tally, per_check
from datasets_app.export.http import audited
from datasets_app.export.stream import check_split, chunks, export_format, format_items
from datasets_app.models import Dataset, Split


class Command(BaseCommand):
    help = "Export a dataset's accepted items for fine-tuning (findings and progress on stderr)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="The dataset's name.")
        parser.add_argument("--format", required=True, dest="fmt", help=", ".join(FORMATS))
        parser.add_argument("--split", help=", ".join(Split.values) + "; default all")
        parser.add_argument("--output", type=Path, help="File to write; default stdout.")
        parser.add_argument("--redact", action="store_true", help="Replace e-mails, keys...")
        parser.add_argument(
            "--strict", action="store_true", help="Write nothing and fail if a check finds any."
        )
        parser.add_argument("--card", type=Path, help="Where to write the dataset card.")

    def handle(self, *args: Any, **options: Any) -> None:
        dataset, fmt, split = self._arguments(options)
        redact, output = options["redact"], options["output"]
        found = self._check(dataset, fmt, split, redact)
        if options["strict"] and (blocking := found.blocking()):
            raise CommandError(
                f"{blocking.total()} findings; nothing written (--strict): {per_check(blocking)}."
            )
        card_path = options["card"] or (output.with_suffix(".card.md") if output else None)
        total = format_items(dataset, fmt, split).count()
        with (
            open(output, "w", encoding="utf-8", newline="")
            if output
            else nullcontext(self.stdout) as target
        ):
            self._write(target, dataset, fmt, split, redact, total)
        if card_path is not None:
            text = card(dataset, fmt, split, found, redact=redact)
            card_path.write_text(text, encoding="utf-8")
        audited(None, dataset, fmt, split, redact)
        where = f" to {output}" if output else ""
        self.stderr.write(f"{total} items written{where}; {found.total} findings.")

    def _check(self, dataset: Dataset, fmt: str, split: str | None, redact: bool) -> Tally:
        """Each finding on stderr as it is found; only a bounded tally is kept, for the card."""
        found = Tally()
        for finding in check(dataset, fmt, split, redact=redact):
            self.stderr.write(str(finding))
            found.add(finding)
        return found

    def _arguments(self, options: dict[str, Any]) -> tuple[Dataset, str, str | None]:
        name, fmt, split = options["dataset"], options["fmt"], options["split"]
        dataset = Dataset.objects.filter(name=name).first()
        if dataset is None:
            known = ", ".join(Dataset.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No dataset named “{name}” (datasets: {known}).")
        try:
            export_format(fmt)
            split = check_split(split)
        except ValueError as exc:  # UnknownFormat too: each names the choices
            raise CommandError(str(exc)) from None
        return dataset, fmt, split

    def _write(
        self, target: Any, dataset: Dataset, fmt: str, split: str | None, redact: bool, total: int
    ) -> None:
        # The bar writes to the real stderr stream: Django's wrapper would add a newline to
        # each of its redraws.
        bar_file: TextIO = getattr(self.stderr, "_out", sys.stderr)
        with tqdm(total=total, unit="item", file=bar_file, desc="export") as bar:
            for count, text in chunks(dataset, fmt, split, redact=redact):
                if hasattr(target, "style_func"):  # Django's stdout wrapper: no added newline
                    target.write(text, ending="")
                else:
                    target.write(text)
                bar.update(count)
