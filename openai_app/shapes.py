"""The objects OpenAI's chat completions answer with: `chat.completion`, and the stream's
`chat.completion.chunk`s, built from a Parley run."""

from __future__ import annotations

import json
from typing import Any

from sessions_app.engine.errors import CUT
from sessions_app.models import Run


def completion_id(run_id: Any) -> str:
    return f"chatcmpl-{str(run_id).replace('-', '')}"


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


def completion(run: Run, model: str) -> dict[str, Any]:
    return {
        "id": completion_id(run.run_id),
        "object": "chat.completion",
        "created": int(run.created_at.timestamp()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": run.content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason(run.error),
            }
        ],
        "usage": usage_of(run.metrics()),
        "system_fingerprint": None,
    }


def chunk(
    run_id: Any,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One chunk; with `include_usage`, every chunk says `"usage": null` but the last's."""
    found: dict[str, Any] = {
        "id": completion_id(run_id),
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

    def __init__(self, run_id: Any, created: int, model: str, include_usage: bool) -> None:
        shape = chunk(run_id, created, model, {"content": self.MARK}, None, include_usage)
        encoded = json.dumps(shape, separators=(",", ":"))
        self.head, self.tail = encoded.split(json.dumps(self.MARK))

    def data(self, piece: str) -> str:
        return f"data: {self.head}{json.dumps(piece)}{self.tail}\n\n"
