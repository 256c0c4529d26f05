"""Checks run before an export: what a trainer would reject or learn wrongly from. Each finding
names its item; nothing is dropped, the export writes every item and strict mode refuses."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count

from datasets_app.export import redact as redaction
from datasets_app.export.stream import exported_items, pages
from datasets_app.export.turns import Turn, turns
from datasets_app.models import Dataset, DatasetItem, ItemSource

# A turn longer than this is most likely a pasted file or a runaway answer.
MAX_TURN_CHARS = 32_000
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
    limit = getattr(settings, "PARLEY_DATASET_MAX_TURN_CHARS", MAX_TURN_CHARS)
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


def _texts(item: DatasetItem, shown: list[Turn]) -> str:
    parts = [turn.content for turn in shown] + [item.rejected_answer]
    parts += [json.dumps(call, ensure_ascii=False) for turn in shown for call in turn.calls]
    if item.corrected_answer:
        parts.append(item.original_answer)  # exported too, by openai-preference
    return "\n".join(parts)


def item_findings(item: DatasetItem, *, redact: bool = False) -> list[Finding]:
    shown = turns(item, redaction.keep)
    problems, unanswered = _role_order(shown)
    empty, oversized = _sizes(item, shown)
    found: list[tuple[str, str]] = [(ROLE_ORDER, p) for p in problems]
    found += [(UNANSWERED, u) for u in unanswered] + [(ARGUMENTS, a) for a in _arguments(shown)]
    found += [(EMPTY, e) for e in empty] + [(OVERSIZED, o) for o in oversized]
    kinds = redaction.found_in(_texts(item, shown))
    if kinds:
        summary = ", ".join(f"{n} × {kind}" for kind, n in sorted(kinds.items()))
        found.append(
            (REDACTED, f"replaced {summary}")
            if redact
            else (PERSONAL, f"{summary} (export with redaction to replace them)")
        )
    return [Finding(str(item.item_id), check, detail) for check, detail in found]


def duplicates(dataset: Dataset, split: str | None = None) -> list[Finding]:
    """Items whose conversation another exported item has already, found by the database."""
    items = exported_items(dataset, split)
    repeated = items.order_by().values("content_hash").annotate(n=Count("item_id")).filter(n__gt=1)
    groups = items.filter(content_hash__in=repeated.values("content_hash"))
    first: dict[str, str] = {}
    out = []
    rows = groups.order_by("content_hash", "created_at", "item_id")
    for item_id, digest in rows.values_list("item_id", "content_hash").iterator():
        if digest in first:
            out.append(
                Finding(str(item_id), DUPLICATE, f"same conversation as item {first[digest]}")
            )
        else:
            first[digest] = str(item_id)
    return out


def check(dataset: Dataset, split: str | None = None, *, redact: bool = False) -> list[Finding]:
    """Every finding about the items an export of this dataset (and split) would write."""
    findings: list[Finding] = []
    for found in pages(exported_items(dataset, split)):
        for item in found:
            findings += item_findings(item, redact=redact)
    return findings + duplicates(dataset, split)


def counts(findings: list[Finding]) -> Counter[str]:
    return Counter(f.check for f in findings)
