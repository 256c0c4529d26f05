"""Tokens a model call used: as the upstream reports them, counted when it does not, priced."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
from django.conf import settings

from sessions_app.llm.pool import tokenizer_client

# Chat templates wrap each message in a few special tokens; this is a typical count.
_PER_MESSAGE_OVERHEAD = 4


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Usage:
        """From a streamed chunk's `usage`, read as plain JSON."""
        prompt_details = raw.get("prompt_tokens_details") or {}
        completion_details = raw.get("completion_tokens_details") or {}
        return cls(
            input_tokens=raw.get("prompt_tokens") or 0,
            output_tokens=raw.get("completion_tokens") or 0,
            cache_read_tokens=prompt_details.get("cached_tokens") or 0,
            reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
        )

    @classmethod
    def from_model(cls, raw: Any) -> Usage:
        """From `openai`'s typed `CompletionUsage`."""
        prompt_details = getattr(raw, "prompt_tokens_details", None)
        completion_details = getattr(raw, "completion_tokens_details", None)
        return cls(
            input_tokens=raw.prompt_tokens or 0,
            output_tokens=raw.completion_tokens or 0,
            cache_read_tokens=getattr(prompt_details, "cached_tokens", 0) or 0,
            reasoning_tokens=getattr(completion_details, "reasoning_tokens", 0) or 0,
        )


async def estimate_usage(server: str, messages: list[dict[str, Any]], answer: str) -> Usage:
    """Count tokens for an upstream that reported none: the tokenizer of the server at `server`
    (its root URL, without `/v1`), else ~4 chars/token."""
    prompt = "\n".join(_message_text(m) for m in messages)
    prompt_count = await count_tokens(server, prompt) if prompt else 0
    answer_count = await count_tokens(server, answer) if answer else 0
    if prompt_count is None or answer_count is None:
        prompt_count = (len(prompt) + 3) // 4
        answer_count = (len(answer) + 3) // 4
    return Usage(
        input_tokens=prompt_count + _PER_MESSAGE_OVERHEAD * len(messages),
        output_tokens=answer_count,
        estimated=True,
    )


async def count_tokens(server: str, text: str) -> int | None:
    """Ask the server's tokenizer (llama.cpp exposes one); None when it has none."""
    http = tokenizer_client()
    for path, body, key in (
        ("/extras/tokenize/count", {"input": text}, "count"),
        ("/tokenize", {"content": text}, "tokens"),
    ):
        try:
            answer = await http.post(server + path, json=body)
        except httpx.HTTPError:
            return None
        if answer.status_code == 200:
            value = answer.json().get(key)
            return len(value) if isinstance(value, list) else int(value)
    return None


def _message_text(message: dict[str, Any]) -> str:
    text = message.get("content") or ""
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"])
    return text


def price(model: str, usage: Usage) -> Decimal | None:
    """Cost in USD from LLM_PRICES; None for a model whose price is unknown."""
    for entry in settings.LLM_PRICES.split(";"):
        name, _, rates = entry.partition("=")
        if name.strip() != model or ":" not in rates:
            continue
        per_in, per_out = (Decimal(r) for r in rates.split(":", 1))
        cost = (usage.input_tokens * per_in + usage.output_tokens * per_out) / Decimal(1_000_000)
        return cost.quantize(Decimal("0.000001"))
    return None
