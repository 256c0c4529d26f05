"""The one door to every model provider: an OpenAI-compatible endpoint spoken to with `openai`.

Nothing else in Parley imports `openai`, so tests and benchmarks point one setting at a scripted
upstream and exercise the same code path as production.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
from django.conf import settings

try:  # the HTTP library `openai` reads streams with: httpx2 in recent releases, httpx before
    import httpx2

    _HTTP_MODULES: tuple[Any, ...] = (httpx, httpx2)
except ImportError:  # pragma: no cover - depends on the installed openai
    _HTTP_MODULES = (httpx,)
_HTTP = _HTTP_MODULES[-1]  # the one `openai` sends with
_TIMEOUT_ERRORS = tuple(m.TimeoutException for m in _HTTP_MODULES)
_TRANSPORT_ERRORS = tuple(m.TransportError for m in _HTTP_MODULES)

TIMEOUT_MESSAGE = "The model did not answer in time."


class LLMError(Exception):
    """The upstream failed; `message` is fit to show a user, `status` maps to 502 or 504."""

    def __init__(self, message: str, *, status: int = 502) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


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


@dataclass
class _Pool:
    """One model client (with its own connection pool) and the requests it has open."""

    client: openai.AsyncOpenAI
    busy: int = 0


@dataclass
class _Endpoint:
    base_url: str
    api_key: str
    pools: dict[int, list[_Pool]] = field(default_factory=dict)


# httpcore's pool looks over every connection it holds, and probes each idle one's socket,
# whenever a request starts or ends: with hundreds of streams in one pool that work grows with
# the square of their number, and a burst of new runs spent most of its CPU there. So requests
# fill one client's pool up to this many at a time, then the next; a quiet server uses only
# the first and keeps reusing its connections. For a burst of 100 streams, pools of 8 spend a
# quarter of what pools of 32 did there (a sixth fewer Python calls in all, cProfile).
POOL_SIZE = 8

_endpoint: _Endpoint | None = None


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


_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """The HTTP library's default TLS context, made once: making it (the CA bundle loaded) takes
    tens of milliseconds, on the event loop, for every new client."""
    global _tls
    if _tls is None:
        _tls = _HTTP.create_ssl_context()
    return _tls


def _new_client(url: str, key: str) -> openai.AsyncOpenAI:
    timeout = openai.Timeout(
        settings.LLM_READ_TIMEOUT,
        connect=settings.LLM_CONNECT_TIMEOUT,
        read=settings.LLM_READ_TIMEOUT,
        write=settings.LLM_CONNECT_TIMEOUT,
        pool=settings.LLM_CONNECT_TIMEOUT,
    )
    # max_retries=0: a retried stream would repeat tokens the user already saw. The default
    # transport, not aiohttp's: that one reads for less CPU, but when the upstream's connection
    # breaks it drops the chunks already received and not yet read.
    # Idle connections are kept a minute rather than httpx's five seconds: chat traffic comes in
    # bursts with pauses between, and a new connection costs a TCP (and TLS) handshake before the
    # first token. One the server closed meanwhile is noticed, and replaced, before it is used.
    default = openai.DEFAULT_CONNECTION_LIMITS
    limits = type(default)(
        max_connections=default.max_connections,
        max_keepalive_connections=default.max_keepalive_connections,
        keepalive_expiry=settings.LLM_KEEPALIVE,
    )
    http_client = openai.DefaultAsyncHttpxClient(verify=_tls_context(), limits=limits)
    return openai.AsyncOpenAI(
        base_url=url, api_key=key, max_retries=0, timeout=timeout, http_client=http_client
    )


@contextlib.contextmanager
def client_for_request() -> Iterator[openai.AsyncOpenAI]:
    """A model client for one request: the first with room in its pool (see POOL_SIZE).
    Clients belong to their event loop, since httpx's pools do."""
    global _endpoint
    url, key = base_url(), settings.LLM_API_KEY or "not-needed"
    if _endpoint is None or (_endpoint.base_url, _endpoint.api_key) != (url, key):
        _endpoint = _Endpoint(url, key)
    loop_id = id(asyncio.get_running_loop())
    if loop_id not in _endpoint.pools:
        _endpoint.pools = {loop_id: []}
    pools = _endpoint.pools[loop_id]
    pool = next((p for p in pools if p.busy < POOL_SIZE), None)
    if pool is None:
        pool = _Pool(_new_client(url, key))
        pools.append(pool)
    pool.busy += 1
    try:
        yield pool.client
    finally:
        pool.busy -= 1


async def close_clients() -> None:
    """Close this loop's model clients (their connection pools belong to the loop)."""
    if _endpoint is None:
        return
    for pool in _endpoint.pools.pop(id(asyncio.get_running_loop()), []):
        await pool.client.close()


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return exc.message


def _retry_after(headers: Any) -> float | None:
    """Seconds the endpoint asked us to wait before trying again (`Retry-After`, in seconds or
    as an HTTP date, or OpenAI's `retry-after-ms`); None when it did not say."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        if value.strip().isdigit():
            return float(value)
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):  # a date without a zone cannot be compared: unsaid
        return None


def _seconds(wait: float) -> str:
    count = max(1, math.ceil(wait))
    return "1 second" if count == 1 else f"{count} seconds"


def _describe(exc: BaseException) -> LLMError:
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, (openai.APITimeoutError, *_TIMEOUT_ERRORS)):
        return LLMError(TIMEOUT_MESSAGE, status=504)
    if isinstance(exc, (openai.APIConnectionError, *_TRANSPORT_ERRORS)):
        return LLMError("The model endpoint could not be reached or closed the connection.")
    if isinstance(exc, openai.APIStatusError):
        status = 504 if exc.status_code in (408, 504) else 502
        message = f"The model endpoint answered {exc.status_code}: {_error_detail(exc)}"
        wait = _retry_after(exc.response.headers)
        if wait is not None:
            message = f"{message.rstrip('.')}. Try again in {_seconds(wait)}."
        return LLMError(message, status=status)
    if isinstance(exc, openai.APIError):
        return LLMError(f"The model endpoint failed: {exc.message}")
    return LLMError(f"The model endpoint failed: {exc}")


def status_for_error(message: str) -> int:
    """The HTTP status (502 or 504) of a failure described by `_describe`, from its message,
    which is all a finished run keeps of it."""
    gateway_timeout = ("The model endpoint answered 408:", "The model endpoint answered 504:")
    return 504 if message == TIMEOUT_MESSAGE or message.startswith(gateway_timeout) else 502


def _request_body(
    model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """Sent as it is through `client.post`: the history and tools, plain JSON already, are not
    transformed into `openai`'s typed parameters (see docs/engine.md)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = tools
    return body


async def stream_chat(
    model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> AsyncIterator[Delta | ToolCallsDelta | StreamEnd]:
    """Stream one chat completion; raises LLMError (after any deltas already yielded).

    The request goes through `openai` (endpoint, key, headers, timeouts, status errors); the
    event stream is read as JSON here. `openai` builds a typed model of every chunk, about 0.25 ms
    each: for a 2 000-token answer half a second of CPU, more than everything else Parley does
    for it, so at a few hundred concurrent answers the chunk models alone would saturate a core.
    """
    started = time.perf_counter()
    first: float | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    answered_model = model
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    body = _request_body(model, messages, tools)
    try:
        with client_for_request() as client:
            response = await client.post(
                "/chat/completions", cast_to=_HTTP.Response, body=body, stream=True
            )
            try:
                async for chunk in _sse_json(response.aiter_lines()):
                    answered_model = chunk.get("model") or answered_model
                    if chunk.get("usage"):
                        usage = _usage_from_dict(chunk["usage"])
                    for choice in chunk.get("choices") or ():
                        if choice.get("finish_reason"):
                            finish_reason = choice["finish_reason"]
                        delta = choice.get("delta")
                        if not delta:
                            continue
                        for call in delta.get("tool_calls") or ():
                            _merge_tool_call(calls, call)
                        content = delta.get("content")
                        if content:
                            if first is None:
                                first = time.perf_counter() - started
                            text.append(content)
                            yield Delta(content)
            finally:
                await response.aclose()
    except Exception as exc:  # CancelledError is not an Exception: cancelling closes the request
        raise _describe(exc) from exc
    if finish_reason is None:
        raise LLMError("The model's answer was cut off before it finished.")
    if calls:
        yield ToolCallsDelta([calls[i] for i in sorted(calls)])
    if usage is None:
        usage = await estimate_usage(messages, "".join(text))
    yield StreamEnd(
        usage=usage,
        finish_reason=finish_reason,
        time_to_first_token=first,
        duration=time.perf_counter() - started,
        model=answered_model,
    )


async def _sse_json(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
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


async def complete(model: str, messages: list[dict[str, Any]]) -> tuple[str, Usage]:
    """A plain, non-streamed completion, for background jobs such as titles."""
    try:
        with client_for_request() as client:
            answer = await client.chat.completions.create(model=model, messages=messages)
    except Exception as exc:
        raise _describe(exc) from exc
    content = answer.choices[0].message.content or "" if answer.choices else ""
    usage = _usage_from(answer.usage) if answer.usage else await estimate_usage(messages, content)
    return content, usage


def _usage_from_dict(raw: dict[str, Any]) -> Usage:
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=prompt_details.get("cached_tokens") or 0,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


def _usage_from(raw: Any) -> Usage:
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    completion_details = getattr(raw, "completion_tokens_details", None)
    return Usage(
        input_tokens=raw.prompt_tokens or 0,
        output_tokens=raw.completion_tokens or 0,
        cache_read_tokens=getattr(prompt_details, "cached_tokens", 0) or 0,
        reasoning_tokens=getattr(completion_details, "reasoning_tokens", 0) or 0,
    )


def _merge_tool_call(calls: dict[int, dict[str, Any]], piece: dict[str, Any]) -> None:
    call = calls.setdefault(
        piece.get("index") or 0,
        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
    )
    if piece.get("id"):
        call["id"] = piece["id"]
    function = piece.get("function")
    if function:
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""


def _server_root() -> str:
    root = base_url()
    return root[: -len("/v1")] if root.endswith("/v1") else root


_tokenizer_clients: dict[int, httpx.AsyncClient] = {}


async def count_tokens(text: str) -> int | None:
    """Ask the server's tokenizer (llama.cpp exposes one); None when it has none."""
    loop_id = id(asyncio.get_running_loop())
    http = _tokenizer_clients.get(loop_id)
    if http is None:
        http = httpx.AsyncClient(timeout=5.0)
        _tokenizer_clients.clear()
        _tokenizer_clients[loop_id] = http
    root = _server_root()
    for path, body, key in (
        ("/extras/tokenize/count", {"input": text}, "count"),
        ("/tokenize", {"content": text}, "tokens"),
    ):
        try:
            answer = await http.post(root + path, json=body)
        except httpx.HTTPError:
            return None
        if answer.status_code == 200:
            value = answer.json().get(key)
            return len(value) if isinstance(value, list) else int(value)
    return None


# Chat templates wrap each message in a few special tokens; this is a typical count.
_PER_MESSAGE_OVERHEAD = 4


async def estimate_usage(messages: list[dict[str, Any]], answer: str) -> Usage:
    """Count tokens for an upstream that reported none: its own tokenizer, else ~4 chars/token."""
    prompt = "\n".join(_message_text(m) for m in messages)
    prompt_count = await count_tokens(prompt) if prompt else 0
    answer_count = await count_tokens(answer) if answer else 0
    if prompt_count is None or answer_count is None:
        prompt_count = (len(prompt) + 3) // 4
        answer_count = (len(answer) + 3) // 4
    return Usage(
        input_tokens=prompt_count + _PER_MESSAGE_OVERHEAD * len(messages),
        output_tokens=answer_count,
        estimated=True,
    )


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


async def ping() -> bool:
    """True when the endpoint answers its model list; used by /healthz."""
    try:
        with client_for_request() as client:
            await client.models.list(timeout=3.0)
    except Exception:
        return False
    return True
