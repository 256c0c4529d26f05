"""The dataset card: a Markdown page that says what an export holds and where it came from.
Everything on it is counted by the database; nothing on it changes between two exports of the
same items, so the card can be kept beside the file it describes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Max, Min, QuerySet

from datasets_app.export.checks import CHECKS, Finding, Tally, per_check, tally
from datasets_app.export.stream import check_split, export_format, exported_items, format_items
from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemSource, ItemStatus, Split

# Hugging Face renders HTML in a card: untrusted text must bring no tag, entity or code span.
_LITERAL = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "`": "\\`"})


def _plain(text: object) -> str:
    """Untrusted text (names, descriptions, details) shown as written, lines kept."""
    return str(text).replace("\r\n", "\n").replace("\r", "\n").translate(_LITERAL)


def _inline(text: object) -> str:
    """Untrusted text on one line: a heading or a list item."""
    return _plain(text).replace("\n", " ")


def _cell(text: object) -> str:
    return _inline(text).replace("|", "\\|")


def _tally(items: QuerySet[DatasetItem], field: str, names: list[str]) -> str:
    found = dict(items.order_by().values_list(field).annotate(n=Count("item_id")))
    return ", ".join(f"{name} {found.get(name, 0)}" for name in names)


def _day(moment: datetime | None) -> str:
    return moment.date().isoformat() if moment else "unknown"


def _rules(dataset: Dataset) -> list[str]:
    rules = DatasetRule.objects.filter(dataset=dataset).select_related("agent").order_by("pk")
    lines = [f"- {_inline(rule)}{'' if rule.active else ' (paused)'}" for rule in rules]
    return lines or ["- none: every item was added by hand"]


def _models(items: QuerySet[DatasetItem]) -> list[str]:
    rows = items.order_by().values_list("model").annotate(n=Count("item_id")).order_by("model")
    return [f"- {_inline(model or 'unknown')}: {n}" for model, n in rows] or ["- none"]


def _findings(found: Tally, redact: bool) -> list[str]:
    ran = ", ".join(CHECKS) + (", redaction" if redact else "")
    lines = [f"Checks run: {ran}.", ""]
    if not found.total:
        return [*lines, "No findings."]
    lines += [f"{found.total} findings:", "", "| item | check | detail |", "|---|---|---|"]
    lines += [f"| {f.item_id} | {f.check} | {_cell(f.detail)} |" for f in found.shown]
    if rest := found.left_out():
        lines += ["", f"… and {rest.total()} more: {per_check(rest)}."]
    return lines


def card(
    dataset: Dataset,
    fmt: str,
    split: str | None,
    findings: Tally | Iterable[Finding],
    *,
    redact: bool = False,
) -> str:
    """The card; `findings` are the export's checks, as found or already tallied."""
    found = findings if isinstance(findings, Tally) else tally(findings)
    chosen = export_format(fmt)
    split = check_split(split)
    exported = exported_items(dataset, split)
    every = dataset.items.all() if split is None else dataset.items.filter(split=split)
    accepted = every.filter(status=ItemStatus.ACCEPTED)
    opted_out = accepted.count() - accepted.trainable().count()
    span = exported.aggregate(first=Min("source_created_at"), last=Max("source_created_at"))
    written = format_items(dataset, fmt, split).count()
    lines = [
        f"# {_inline(dataset.name)}",
        "",
        _plain(dataset.description.strip()) or "No description.",
        "",
        "| | |",
        "|---|---|",
        f"| Format | {chosen.name} |",
        f"| File | {_cell(chosen.filename(dataset.name, split))} |",
        f"| Split | {split or 'all'} |",
        f"| Items written | {written} |",
        f"| Redaction | {'on' if redact else 'off'} |",
        "",
        "## Sources",
        "",
        "Rules that add runs as they are rated:",
        "",
        *_rules(dataset),
        "",
        f"Exported items by source: {_tally(exported, 'source', ItemSource.values)}.",
        "",
        f"Source conversations from {_day(span['first'])} to {_day(span['last'])}.",
        "",
        "## Counts",
        "",
        f"- by status: {_tally(every, 'status', ItemStatus.values)}",
        f"- exported (accepted, owner allows training use), by split: "
        f"{_tally(exported, 'split', Split.values)}",
        f"- accepted but left out (owner opted out of training use, or deleted): {opted_out}",
        f"- written by {chosen.name}: {written}",
        "",
        "## Models",
        "",
        *_models(exported),
        "",
        "## Checks",
        "",
        *_findings(found, redact),
    ]
    return "\n".join(lines) + "\n"
