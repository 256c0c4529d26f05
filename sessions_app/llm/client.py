"""The requests Parley makes to the configured model endpoint, and what they give back.

A chat streams through `openai` (endpoint, key, headers, timeouts, status errors) as a plain
POST answered with the HTTP response itself; `stream_reader` reads it. Background jobs use a
plain completion; /healthz pings the model list.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai
from django.conf import settings

from sessions_app.llm.errors import LLMError, describe
from sessions_app.llm.pool import client_for_request
from sessions_app.llm.stream_reader import Answer, json_chunks
from sessions_app.llm.transport import HTTP, READ_TIMEOUT_ERRORS
from sessions_app.llm.usage import Usage, estimate_usage


@dataclass
class Delta:
    """A piece of answer text as it arrives."""

    content: str


@dataclass
class ToolCallsDelta:
    """Tool calls the model asked for, whole, once the stream ended."""

    tool_calls: list[dict[str, Any]]


@dataclass
class StreamEnd:
    usage: Usage
    finish_reason: str | None
    time_to_first_token: float | None
    duration: float
    model: str


def base_url() -> str:
    url = settings.LLM_BASE_URL
    if not url:
        raise LLMError(
            "No model endpoint is configured: set LLM_BASE_URL, or start Parley with "
            "`python manage.py serve` so it runs the embedded model.",
            status=502,
        )
    return url.rstrip("/")


def provider_name(url: str | None = None) -> str:
    host = urlsplit(url or settings.LLM_BASE_URL).hostname or ""
    if host.endswith("openai.com"):
        return "openai"
    if getattr(settings, "LLM_EMBEDDED", False):
        return "llama.cpp"
    return "openai-compatible"


def _client() -> AbstractContextManager[openai.AsyncOpenAI]:
    """A model client for one request to the configured endpoint (see pool)."""
    return client_for_request(base_url(), settings.LLM_API_KEY or "not-needed")


def _server_root() -> str:
    root = base_url()
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _length_cap() -> dict[str, int]:
    """`max_tokens` for the embedded model (see PARLEY_EMBEDDED_MAX_TOKENS); a configured
    endpoint is sent only what Agno sends."""
    cap = settings.PARLEY_EMBEDDED_MAX_TOKENS
    if getattr(settings, "LLM_EMBEDDED", False) and cap > 0:
        return {"max_tokens": cap}
    return {}


def _request_body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    sampling: dict[str, Any] | None,
) -> dict[str, Any]:
    """Sent as it is through `client.post`: the history and tools, plain JSON already, are not
    transformed into `openai`'s typed parameters (see docs/engine.md). An agent's own sampling
    settings win over the embedded model's length cap."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = tools
    body.update(_length_cap())
    body.update(sampling or {})
    return body


async def stream_chat(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    sampling: dict[str, Any] | None = None,
) -> AsyncIterator[Delta | ToolCallsDelta | StreamEnd]:
    """Stream one chat completion; raises LLMError (after any deltas already yielded).
    `sampling`: temperature, top_p, max_tokens, as the agent sets them."""
    answer = Answer(model)
    body = _request_body(model, messages, tools, sampling)
    try:
        with _client() as client:
            response = await client.post(
                "/chat/completions", cast_to=HTTP.Response, body=body, stream=True
            )
            try:
                async for chunk in json_chunks(response.aiter_lines()):
                    for piece in answer.read(chunk):
                        yield Delta(piece)
            finally:
                await response.aclose()
    except Exception as exc:  # CancelledError is not an Exception: cancelling closes the request
        raise describe(exc) from exc
    if answer.finish_reason is None:
        raise LLMError("The model's answer was cut off before it finished.", unavailable=True)
    if answer.calls:
        yield ToolCallsDelta(answer.tool_calls())
    usage = answer.usage
    if usage is None:
        usage = await estimate_usage(_server_root(), messages, "".join(answer.text))
    yield StreamEnd(
        usage=usage,
        finish_reason=answer.finish_reason,
        time_to_first_token=answer.time_to_first_token,
        duration=time.perf_counter() - answer.started,
        model=answer.model,
    )


@dataclass
class Completion:
    text: str
    usage: Usage
    model: str  # as the endpoint names the model that answered


async def complete(
    model: str, messages: list[dict[str, Any]], embedded: dict[str, Any] | None = None
) -> tuple[str, Usage]:
    """A plain, non-streamed completion, for background jobs such as titles. `embedded`:
    sampling settings (temperature, max_tokens…) for the embedded model only; a configured
    endpoint is sent none, as some models refuse them."""
    answer = await completion(model, messages, embedded=embedded)
    return answer.text, answer.usage


async def completion(
    model: str,
    messages: list[dict[str, Any]],
    *,
    sampling: dict[str, Any] | None = None,
    embedded: dict[str, Any] | None = None,
) -> Completion:
    """A non-streamed completion with what answered it. `sampling` is sent to any endpoint
    (an agent's own settings, as runs send them); `embedded`, to the embedded model only."""
    options = _length_cap()
    if getattr(settings, "LLM_EMBEDDED", False):
        options.update(embedded or {})
    options.update(sampling or {})
    try:
        with _client() as client:
            answer = await client.chat.completions.create(model=model, messages=messages, **options)
    except Exception as exc:
        raise describe(exc) from exc
    content = answer.choices[0].message.content or "" if answer.choices else ""
    if answer.usage:
        usage = Usage.from_model(answer.usage)
    else:
        usage = await estimate_usage(_server_root(), messages, content)
    return Completion(content, usage, answer.model or model)


async def ping() -> bool:
    """True when the endpoint answers its model list, or takes the request and is slow to
    answer it: a server busy generating (llama.cpp answers one request at a time) is up."""
    try:
        with _client() as client:
            await client.models.list(timeout=3.0)
    except openai.APITimeoutError as exc:
        return isinstance(exc.__cause__, READ_TIMEOUT_ERRORS)
    except Exception:
        return False
    return True
