"""Checks run before an export: what a trainer would reject or learn wrongly from. Each finding
names its item; nothing is dropped, the export writes every item and strict mode refuses."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, QuerySet

from datasets_app.export import redact as redaction
from datasets_app.export.formats import Format
from datasets_app.export.stream import export_format, format_items, pages
from datasets_app.export.turns import Turn, turns
from datasets_app.models import Dataset, DatasetItem, ItemSource

ROLES = ("system", "user", "assistant", "tool")

ROLE_ORDER = "role order"
EMPTY = "empty turn"
OVERSIZED = "oversized turn"
UNANSWERED = "tool call without result"
ARGUMENTS = "tool arguments"
DUPLICATE = "duplicate"
PERSONAL = "personal data"
REDACTED = "redacted"
CHECKS = (ROLE_ORDER, EMPTY, OVERSIZED, UNANSWERED, ARGUMENTS, DUPLICATE, PERSONAL)
# Findings a card lists in full; the rest are only counted, so a card stays small.
SHOWN = 100


@dataclass(frozen=True)
class Finding:
    item_id: str
    check: str
    detail: str

    @property
    def blocking(self) -> bool:
        """Whether strict mode refuses the export; a redaction done is only reported."""
        return self.check != REDACTED

    def __str__(self) -> str:
        return f"{self.item_id}  {self.check}: {self.detail}"


def _role_order(shown: list[Turn]) -> tuple[list[str], list[str]]:
    """Problems with the order of turns, and tool calls left without a result."""
    problems: list[str] = []
    unanswered: list[str] = []
    waiting: dict[str, str] = {}
    previous = ""
    for i, turn in enumerate(shown):
        role = turn.role
        if role != "tool" and waiting:
            unanswered += [f"turn {i - 1}: call {cid} ({name})" for cid, name in waiting.items()]
            waiting = {}
        if role not in ROLES:
            problems.append(f"turn {i}: unknown role “{role}”")
        elif role == "system" and i:
            problems.append(f"turn {i}: a system message after the first turn")
        elif role == "user" and previous == "user":
            problems.append(f"turn {i}: two user turns in a row")
        elif role == "assistant" and previous not in ("user", "tool"):
            problems.append(f"turn {i}: an assistant turn that answers no user turn or tool result")
        elif role == "tool" and waiting.pop(str(turn.message.get("tool_call_id")), None) is None:
            problems.append(f"turn {i}: a tool result that answers no call")
        if role == "assistant":
            waiting = {str(c.get("id")): _name(c) for c in turn.calls if isinstance(c, dict)}
        previous = role
    unanswered += [f"turn {len(shown) - 1}: call {cid} ({name})" for cid, name in waiting.items()]
    if not any(turn.role == "user" for turn in shown):
        problems.append("no user turn")
    last = shown[-1] if shown else None
    if last is None or last.role != "assistant" or last.calls:
        problems.append("does not end with an assistant answer")
    return problems, unanswered


def _name(call: dict) -> str:
    function = call.get("function")
    return str(function.get("name")) if isinstance(function, dict) else "?"


def _arguments(shown: list[Turn]) -> list[str]:
    bad = []
    for i, turn in enumerate(shown):
        for call in turn.calls:
            function = call.get("function") if isinstance(call, dict) else None
            try:
                ok = isinstance(json.loads(function["arguments"]), dict)
            except (TypeError, KeyError, ValueError):
                ok = False
            if not ok:
                bad.append(f"turn {i}: the arguments of {_name(call) if function else 'a call'} "
                           "are not a JSON object")  # fmt: skip
    return bad


def _sizes(item: DatasetItem, shown: list[Turn]) -> tuple[list[str], list[str]]:
    limit = settings.PARLEY_DATASET_MAX_TURN_CHARS
    empty, oversized = [], []
    for i, turn in enumerate(shown):
        if not turn.content.strip() and not turn.calls:
            empty.append(f"turn {i} ({turn.role}) is empty")
        if len(turn.content) > limit:
            oversized.append(f"turn {i} ({turn.role}): {len(turn.content):,} characters, "
                             f"over {limit:,}")  # fmt: skip
    if item.source == ItemSource.PAIR and not item.rejected_answer.strip():
        empty.append("the losing answer is empty")
    return empty, oversized


def _personal(item: DatasetItem, fmt: Format, redact: bool) -> list[tuple[str, str]]:
    """What redaction replaces in the lines this format writes for the item."""
    redactor = redaction.Redactor()
    fmt.render(item, redactor)
    if not redactor.found:
        return []
    summary = redactor.summary()
    if redact:
        return [(REDACTED, f"replaced {summary}")]
    return [(PERSONAL, f"{summary} (export with redaction to replace them)")]


def item_findings(item: DatasetItem, fmt: Format, *, redact: bool = False) -> list[Finding]:
    shown = turns(item, redaction.keep)
    problems, unanswered = _role_order(shown)
    empty, oversized = _sizes(item, shown)
    found: list[tuple[str, str]] = [(ROLE_ORDER, p) for p in problems]
    found += [(UNANSWERED, u) for u in unanswered] + [(ARGUMENTS, a) for a in _arguments(shown)]
    found += [(EMPTY, e) for e in empty] + [(OVERSIZED, o) for o in oversized]
    found += _personal(item, fmt, redact)
    return [Finding(str(item.item_id), check, detail) for check, detail in found]


def duplicates(items: QuerySet[DatasetItem]) -> Iterator[Finding]:
    """Items whose conversation an earlier one of `items` has already, found by the database."""
    repeated = items.order_by().values("content_hash").annotate(n=Count("item_id")).filter(n__gt=1)
    groups = items.filter(content_hash__in=repeated.values("content_hash"))
    rows = groups.order_by("content_hash", "created_at", "item_id")
    digest, first = None, ""
    # Rows come grouped by conversation, so only the current group's first item is kept.
    for item_id, item_digest in rows.values_list("item_id", "content_hash").iterator():
        if item_digest != digest:
            digest, first = item_digest, str(item_id)
        else:
            yield Finding(str(item_id), DUPLICATE, f"same conversation as item {first}")


def check(
    dataset: Dataset, fmt: str, split: str | None = None, *, redact: bool = False
) -> Iterator[Finding]:
    """Every finding about the items this export writes, as they are found: a page at a time,
    then the duplicates."""
    chosen = export_format(fmt)
    items = format_items(dataset, fmt, split)
    for found in pages(items):
        for item in found:
            yield from item_findings(item, chosen, redact=redact)
    yield from duplicates(items)


@dataclass
class Tally:
    """Findings kept for the card: the first `limit` in full, then only counted by check, so
    any number of them fits in memory."""

    limit: int = SHOWN
    shown: list[Finding] = field(default_factory=list)
    by_check: Counter[str] = field(default_factory=Counter)

    def add(self, finding: Finding) -> None:
        if len(self.shown) < self.limit:
            self.shown.append(finding)
        self.by_check[finding.check] += 1

    @property
    def total(self) -> int:
        return sum(self.by_check.values())

    def blocking(self) -> Counter[str]:
        """Per check, the findings strict mode refuses the export for."""
        return Counter({name: n for name, n in self.by_check.items() if name != REDACTED})

    def left_out(self) -> Counter[str]:
        """Per check, the findings counted but not kept in full."""
        return self.by_check - Counter(f.check for f in self.shown)


def per_check(counts: Counter[str]) -> str:
    """The counts in the order the checks run: "role order 12, duplicate 3"."""
    return ", ".join(f"{name} {counts[name]}" for name in (*CHECKS, REDACTED) if counts[name])


def tally(findings: Iterable[Finding], limit: int = SHOWN) -> Tally:
    kept = Tally(limit)
    for finding in findings:
        kept.add(finding)
    return kept
