"""The record of one model call: every token and cost total in Parley is summed from these."""

from __future__ import annotations

from typing import Any

from sessions_app.llm.client import provider_name
from sessions_app.llm.usage import Usage, price
from sessions_app.models import LLMCall

SUMMED = ("input_tokens", "output_tokens", "total_tokens", "cache_read_tokens", "reasoning_tokens")


def call_row(
    *,
    usage: Usage,
    model: str,
    duration: float,
    ok: bool,
    error: str = "",
    model_provider: str | None = None,
    **links: Any,
) -> LLMCall:
    """An unsaved LLMCall; `links` are its kind, run, session, user and agent."""
    return LLMCall(
        model=model,
        model_provider=provider_name() if model_provider is None else model_provider,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        duration=duration,
        usage_estimated=usage.estimated,
        cost=price(model, usage),
        ok=ok,
        error=error,
        **links,
    )


def totals(rows: list[LLMCall]) -> dict[str, Any]:
    """What a run's metric columns hold: the sums of its calls."""
    costs = [row.cost for row in rows if row.cost is not None]
    return {
        **{name: sum(getattr(row, name) for row in rows) for name in SUMMED},
        "duration": sum(row.duration or 0 for row in rows) if rows else None,
        "usage_estimated": any(row.usage_estimated for row in rows),
        "cost": sum(costs) if costs else None,
    }
