"""Figures as people read them: durations, token counts, costs, statuses and links."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.utils import quote
from django.db.models import Model
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from sessions_app.models import Run, TokenMetrics

EMPTY = "–"


def duration(seconds: float | None) -> str:
    """0.0123 → "12 ms", 1.7273 → "1.73 s", 312.4 → "5 min 12 s"."""
    if seconds is None:
        return EMPTY
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def tokens(count: int | None) -> str:
    return EMPTY if count is None else f"{count:,}"


def cost(value: Decimal | float | None, estimated: bool = False) -> str:
    """USD with enough digits to tell small calls apart; "~" when the usage was counted here."""
    if value is None:
        return EMPTY
    if value >= 1:
        amount = f"${value:,.2f}"
    elif value >= Decimal("0.0001") or value == 0:
        amount = f"${value:.4f}"
    else:
        amount = f"${value:.6f}"
    return f"~{amount}" if estimated else amount


def rating(value: int | None) -> str:
    return {1: "👍", -1: "👎"}.get(value, EMPTY) if value is not None else EMPTY


def status(value: str) -> SafeString:
    return format_html('<span class="parley-status status-{}">{}</span>', value.lower(), value)


def change_url(model: type[Model], pk: Any) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[quote(pk)])


def link(url: str, text: Any) -> SafeString:
    return format_html('<a href="{}">{}</a>', url, text)


def admin_link(obj: Model | None, text: Any = None) -> SafeString | str:
    """A link to the object's admin page; its text escaped."""
    if obj is None:
        return EMPTY
    return link(change_url(type(obj), obj.pk), text or obj)


def changelist_url(model: type[Model], **query: Any) -> str:
    meta = model._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    return f"{url}?{urlencode(query)}" if query else url


def pretty_json(value: Any) -> SafeString:
    if value is None:
        return format_html('<span class="quiet">{}</span>', EMPTY)
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    return format_html('<pre class="parley-json">{}</pre>', text)


def excerpt(text: str, length: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= length else flat[: length - 1] + "…"


def shown(value: Any, unit: str) -> str:
    """A dashboard figure in its unit: count, tokens, usd, ratio, score, seconds, time or
    text."""
    if value is None or value == "":
        return EMPTY
    if unit in ("count", "tokens"):
        return tokens(int(value))
    if unit == "usd":
        return cost(Decimal(str(value)))
    if unit == "ratio":
        return f"{float(value) * 100:.1f} %"
    if unit == "score":
        return f"{float(value):.2f}"
    if unit == "seconds":
        return duration(float(value))
    if unit == "time" and isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


def change(percent: float | None, previous: Any = None, value: Any = None) -> str:
    """Up or down against the previous period, which may have had none of it."""
    if percent is None:
        if previous is None:
            return "no earlier data"
        return "none before" if value else "no change"
    arrow = "▲" if percent > 0 else "▼" if percent < 0 else "="
    return f"{arrow} {abs(percent):.1f} %"


# What a run's page says of figures that are not there to show.
STILL_RUNNING = "still running: figures come when it ends"
NOT_COUNTED = "unknown: the run stopped before its use was counted"


def usage_source(obj: TokenMetrics) -> str:
    """Where the figures come from, truthfully: a run may be streaming still, or may have been
    left by a process that stopped before anyone counted."""
    if isinstance(obj, Run) and obj.is_active:
        return STILL_RUNNING
    if isinstance(obj, Run) and not obj.usage_known:
        return NOT_COUNTED
    return "estimated by Parley" if obj.usage_estimated else "reported by the model"


def metrics(obj: TokenMetrics) -> list[tuple[str, str]]:
    speed = obj.tokens_per_second
    counted = not isinstance(obj, Run) or obj.usage_known
    return [
        ("Tokens in", tokens(obj.input_tokens) if counted else EMPTY),
        ("Tokens out", tokens(obj.output_tokens) if counted else EMPTY),
        ("First token", duration(obj.time_to_first_token)),
        ("Duration", duration(obj.duration)),
        ("Speed", f"{speed:,.1f} tokens/s" if speed else EMPTY),
        ("Cost", cost(obj.cost, obj.usage_estimated)),
        ("Usage", usage_source(obj)),
    ]
