"""The objects OpenAI's chat completions answer with: `chat.completion`, and the stream's
`chat.completion.chunk`s, built from a Parley run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sessions_app.engine import RunHandle
from sessions_app.engine.errors import CUT
from sessions_app.models import Run
from sessions_app.models.conversations import TOKEN_FIELDS


def completion_id(run_id: Any, part: int = 0) -> str:
    """A response's id: its run's, and for a run gone on after its client's tools, which
    part of it."""
    own = f"chatcmpl-{str(run_id).replace('-', '')}"
    return f"{own}-{part}" if part else own


@dataclass(frozen=True)
class Part:
    """The part of a run one response is: all of it, or, for a run gone on after its client's
    tools, what it said and used since. OpenAI's responses are each a turn of their own."""

    run_id: Any
    number: int = 0  # the seq it goes on after (0: the run from its start)
    said: str = ""
    used: dict[str, Any] = field(default_factory=dict)  # the run's metrics before

    @classmethod
    def of(cls, handle: RunHandle) -> Part:
        before = handle.plan.before if handle.plan else None
        if before is None:
            return cls(handle.run_id)
        return cls(handle.run_id, before.seq, before.said, before.metrics)

    @property
    def id(self) -> str:
        return completion_id(self.run_id, self.number)

    def content(self, whole: str) -> str:
        return whole[len(self.said) :] if whole.startswith(self.said) else whole

    def usage(self, metrics: dict[str, Any]) -> dict[str, Any]:
        since = {
            name: (metrics.get(name) or 0) - (self.used.get(name) or 0) for name in TOKEN_FIELDS
        }
        return usage_of(since)


def tool_calls(pending: list[dict[str, Any]], streamed: bool = False) -> list[dict[str, Any]]:
    """Calls of the client's tools as OpenAI sends them (with their `index` in a stream)."""
    return [
        {
            **({"index": n} if streamed else {}),
            "id": call["id"],
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": call["function"].get("arguments") or "{}",
            },
        }
        for n, call in enumerate(pending)
    ]


def usage_of(metrics: dict[str, Any]) -> dict[str, Any]:
    usage = {
        "prompt_tokens": metrics.get("input_tokens") or 0,
        "completion_tokens": metrics.get("output_tokens") or 0,
        "total_tokens": metrics.get("total_tokens") or 0,
    }
    if metrics.get("cache_read_tokens"):
        usage["prompt_tokens_details"] = {"cached_tokens": metrics["cache_read_tokens"]}
    if metrics.get("reasoning_tokens"):
        usage["completion_tokens_details"] = {"reasoning_tokens": metrics["reasoning_tokens"]}
    return usage


def finish_reason(error: str) -> str:
    """A completed answer's: "length" when the model stopped at its limit."""
    return "length" if error == CUT else "stop"


def completion(run: Run, model: str, part: Part, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """The response of one request: paused for the client's tools, their calls."""
    content = part.content(run.content)
    message = {"role": "assistant", "content": content, "refusal": None}
    finish = finish_reason(run.error)
    if pending:
        message.update(content=content or None, tool_calls=tool_calls(pending))
        finish = "tool_calls"
    return {
        "id": part.id,
        "object": "chat.completion",
        "created": int(run.created_at.timestamp()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": part.usage(run.metrics()),
        "system_fingerprint": None,
    }


def chunk(
    part: Part,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One chunk; with `include_usage`, every chunk says `"usage": null` but the last's."""
    found: dict[str, Any] = {
        "id": part.id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if include_usage:
        found["usage"] = None
    return found


class ContentChunks:
    """A stream's content chunks, alike but for their text: encoded around the text once, not
    once a piece (a fast model sends hundreds of pieces a second)."""

    MARK = "\x00"

    def __init__(self, part: Part, created: int, model: str, include_usage: bool) -> None:
        shape = chunk(part, created, model, {"content": self.MARK}, None, include_usage)
        encoded = json.dumps(shape, separators=(",", ":"))
        self.head, self.tail = encoded.split(json.dumps(self.MARK))

    def data(self, piece: str) -> str:
        return f"data: {self.head}{json.dumps(piece)}{self.tail}\n\n"
