"""Reading a streamed chat completion: its event stream as JSON chunks, the chunks as an answer.

The event stream is read as plain JSON rather than through `openai`'s typed chunk models, whose
building would cost more CPU per streamed token than everything else Parley does with it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sessions_app.llm.errors import LLMError
from sessions_app.llm.usage import Usage


@dataclass
class Answer:
    """What a stream has said so far; its text pieces are returned by `read` as they come."""

    model: str
    started: float = field(default_factory=time.perf_counter)
    time_to_first_token: float | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def read(self, chunk: dict[str, Any]) -> list[str]:
        """Take in one chunk; its new pieces of text."""
        pieces: list[str] = []
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = Usage.from_json(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not delta:
                continue
            for call in delta.get("tool_calls") or ():
                self._merge_tool_call(call)
            content = delta.get("content")
            if content:
                if self.time_to_first_token is None:
                    self.time_to_first_token = time.perf_counter() - self.started
                self.text.append(content)
                pieces.append(content)
        return pieces

    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls asked for, whole, in their order."""
        return [self.calls[i] for i in sorted(self.calls)]

    def _merge_tool_call(self, piece: dict[str, Any]) -> None:
        call = self.calls.setdefault(
            piece.get("index") or 0,
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if piece.get("id"):
            call["id"] = piece["id"]
        function = piece.get("function")
        if function:
            # OpenAI gives the name once; llama-cpp-python repeats it whole in every delta.
            name = function.get("name") or ""
            if name != call["function"]["name"]:
                call["function"]["name"] += name
            call["function"]["arguments"] += function.get("arguments") or ""


async def json_chunks(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of a chat-completions event stream, up to `[DONE]`.

    An event is its `data:` lines joined by newlines, ended by a blank line; comments and
    other fields are skipped. An `error` event or an object with an `error` member (how
    OpenAI-compatible servers report a failure after the stream has begun) raises.
    """
    data: list[str] = []
    event = ""
    async for line in lines:
        if line:
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            elif line.startswith("event:"):
                event = line[6:].strip()
            continue
        if not data:
            continue
        payload, data = "\n".join(data), []
        if payload == "[DONE]":
            # Read the body to its end (nothing but the chunked encoding's last chunk follows):
            # a response closed before that closes its connection too, and the next request
            # would open a new one instead of reusing it from the pool.
            async for _ in lines:
                pass
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise LLMError("The model endpoint sent a malformed stream.") from None
        if event == "error" or (isinstance(chunk, dict) and chunk.get("error")):
            raise LLMError(f"The model endpoint failed: {_stream_error(chunk)}")
        event = ""
        if isinstance(chunk, dict):
            yield chunk


def _stream_error(chunk: Any) -> str:
    inner = chunk.get("error", chunk) if isinstance(chunk, dict) else chunk
    if isinstance(inner, dict):
        return str(inner.get("message") or inner)
    return str(inner)
