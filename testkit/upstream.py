"""A scripted OpenAI-compatible chat-completions server on a real loopback socket.

Tests and benchmarks point the real ``openai``/``httpx`` clients at it, so everything between our
code and the wire (connection pooling, SSE parsing, timeouts, disconnects) runs for real while the
answers stay deterministic. Pure stdlib: one asyncio loop in a daemon thread serves every
connection (HTTP/1.1 keep-alive), so hundreds of concurrent streams cost no threads.

Each POST /v1/chat/completions consumes the next scripted ``Reply`` (FIFO), else ``default``.
Streams are sent as OpenAI sends them, in chunked transfer-encoding so the connection stays
reusable: a role delta, content (or tool-call) deltas, a ``finish_reason`` chunk, an optional
``choices: []`` usage chunk, then ``data: [DONE]``. Non-streaming answers are one
``chat.completion`` object. Also served: GET /v1/models, GET /health and, with ``tokenize=True``,
llama-cpp-python's POST /extras/tokenize/count.

Usage::

    with ScriptedUpstream() as upstream:
        upstream.script(Reply("Hello there"), Reply(status=429, error_message="slow down"))
        client = OpenAI(base_url=upstream.base_url, api_key="x")

For benchmarks where sharing the GIL with the code under test would skew numbers, run it as its
own process: ``python -m testkit.upstream --port 8001 --tokens 50 --delay 0.02``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import http
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Reply", "ScriptedUpstream", "count_prompt_tokens", "echo_reply"]

_log = logging.getLogger(__name__)
_WORDISH = re.compile(r"\S+\s*|\s+")
_ARGS_PIECE = 8  # characters of tool-call arguments per streamed delta
# OpenAI-style (type, code) for error bodies; anything else 4xx/5xx falls back below.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


@dataclass
class Reply:
    """One scripted answer to one chat request (see the module docstring for how it is sent)."""

    content: str = ""
    chunks: list[str] | None = None  # explicit stream pieces; default: word-ish split of content
    tokens: int | None = None  # with empty content: generate "tok0 ", "tok1 ", ...
    first_delay: float = 0.0  # seconds before the first content / tool-call delta
    delay: float = 0.0  # seconds between later deltas
    status: int = 200  # non-200: OpenAI-style JSON error body instead of an answer
    error_message: str = "scripted upstream error"
    headers: dict[str, str] | None = None  # extra headers of an error answer (Retry-After)
    cut_after: int | None = None  # stream: close the socket after this many deltas, no [DONE]
    error_after: int | None = None  # stream: after this many deltas an error event, then the end
    hang: bool = False  # never answer; wait until the client leaves or the server stops
    held: threading.Event | None = None  # answer only once the test sets it
    usage: bool | None = None  # None: like OpenAI (stream only with include_usage); False: never
    prompt_tokens: int | None = None  # default: count_prompt_tokens(request)
    completion_tokens: int | None = None  # default: number of streamed deltas
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "name", "arguments": str | dict}]
    model: str | None = None  # default: echo the request's model
    finish_reason: str | None = None  # default: "tool_calls" if tool_calls else "stop"

    def pieces(self) -> list[str]:
        """Content pieces in streaming order; joined they are the whole answer text."""
        if self.chunks is not None:
            return list(self.chunks)
        if self.content:
            return _WORDISH.findall(self.content)
        if self.tokens:
            return [f"tok{i} " for i in range(self.tokens)]
        return []

    def calls(self) -> list[dict[str, str]]:
        """Tool calls normalised to {"id", "name", "arguments": json-string}."""
        out = []
        for i, call in enumerate(self.tool_calls or ()):
            args = call.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args)
            out.append(
                {"id": call.get("id") or f"call_{i}", "name": call["name"], "arguments": args}
            )
        return out


ReplySource = Reply | Callable[[dict], Reply]


def _text(content: Any) -> str:
    """Text of a message's content, whether a string or a list of OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return " ".join(parts)
    return ""


def count_prompt_tokens(body: dict) -> int:
    """Deterministic stand-in for a tokenizer: whitespace words of all messages + 4 per message."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    return sum(len(_text(m.get("content")).split()) + 4 for m in messages)


def echo_reply(body: dict) -> Reply:
    """Default answer: echo the last user message, so tests see what actually reached the model."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return Reply(content=f"Echo: {_text(message.get('content'))}")
    return Reply(content="Echo: ")


def _error_body(status: int, message: str) -> dict:
    """OpenAI's error envelope, so clients raise their usual APIStatusError subclasses."""
    kind, code = _ERROR_KINDS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _head(status: int, headers: dict[str, str]) -> bytes:
    """Status line and headers of an HTTP/1.1 response."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    lines = [f"HTTP/1.1 {status} {phrase}", "Server: scripted-upstream"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(data: bytes) -> bytes:
    """One chunked transfer-encoding frame (keeps the connection reusable after a stream)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(obj: dict) -> bytes:
    """One SSE event, framed as one HTTP chunk."""
    return _chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")


def _quiet_exceptions(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Client hang-ups are normal here; don't print tracebacks for them."""
    if isinstance(context.get("exception"), (OSError, asyncio.CancelledError)):
        return
    loop.default_exception_handler(context)


class _Disconnected(Exception):
    """The client went away before the answer was complete."""


class _BadRequest(Exception):
    """Malformed HTTP; answered with ``status`` and the connection is closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Request:
    method: str
    path: str
    body: bytes
    keep_alive: bool


def _counter(attribute: str, doc: str) -> property:
    """A read-only public view of one of ScriptedUpstream's private counters."""
    return property(lambda upstream: getattr(upstream, attribute), doc=doc)


class ScriptedUpstream:
    """Loopback OpenAI chat-completions server answering from a FIFO script of ``Reply``s."""

    def __init__(
        self,
        *,
        default: ReplySource = echo_reply,
        tokenize: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.default = default  # used when the script is empty; a Reply or fn(request) -> Reply
        self.tokenize = tokenize  # serve llama-cpp-python's POST /extras/tokenize/count
        self.hang_models = False  # accept GET /v1/models but never answer it, as a busy server
        self.host = host
        self.port: int | None = None
        self._wanted_port = port
        self._lock = threading.Lock()
        self._requests: list[dict] = []
        self._script: collections.deque[ReplySource] = collections.deque()
        self._active = self._peak = self._completed = self._disconnects = 0
        self._connections = self._model_lists = 0
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ScriptedUpstream:
        """Bind and serve in a daemon thread; returns self once the port is known."""
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run, args=(loop,), daemon=True, name="scripted-upstream"
        )
        self._thread.start()
        try:
            self.port = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(timeout=10)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every open connection (hanging ones included), then the loop."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self._server = None

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.set_exception_handler(_quiet_exceptions)
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _listen(self) -> int:
        # A large backlog: benchmarks open hundreds of connections at once.
        self._server = await asyncio.start_server(
            self._connection, self.host, self._wanted_port, backlog=2048
        )
        return self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.sleep(0)  # let transports finish closing before the loop stops

    # -- public state ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What to pass as the OpenAI client's ``base_url``."""
        if self.port is None:
            raise RuntimeError("ScriptedUpstream is not started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[dict]:
        """Snapshot of every chat request body received, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._script)

    # Counters the server's thread keeps; read-only from outside.
    active_streams = _counter("_active", "Streaming answers currently being written.")
    peak_streams = _counter(
        "_peak", "Most streams in flight at once, so benchmarks can check the load overlapped."
    )
    completed = _counter(
        "_completed",
        "Chat requests answered in full (scripted error statuses included; cuts/hangs not).",
    )
    connections = _counter(
        "_connections", "TCP connections accepted so far: a client that reuses its pool opens one."
    )
    model_lists = _counter(
        "_model_lists", "GET /v1/models requests received so far (how /healthz probes an endpoint)."
    )
    disconnects = _counter(
        "_disconnects", "Chat requests whose client went away before the answer was complete."
    )

    def script(self, *replies: ReplySource) -> None:
        """Queue replies; each chat request consumes one (FIFO), then ``default`` takes over."""
        with self._lock:
            self._script.extend(replies)

    def reset(self, *, counters: bool = False) -> None:
        """Forget recorded requests, queued replies and `hang_models` (and, if asked,
        completed/disconnects)."""
        with self._lock:
            self._requests.clear()
            self._script.clear()
            self.hang_models = False
            if counters:
                self._completed = self._disconnects = 0
                self._peak = self._active

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Poll ``predicate`` (``lambda: up.disconnects == 1``): server-side effects lag a bit."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    async def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[dict]:
        """The requests received, once there are at least ``count``: from async tests, whose
        own loop sends them, so it must not be blocked while waiting."""
        deadline = time.monotonic() + timeout
        while len(received := self.requests) < count:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{len(received)} requests after {timeout} s, not {count}")
            await asyncio.sleep(0.01)
        return received

    # -- HTTP ------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve keep-alive requests on one connection until either side closes it."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        with self._lock:
            self._connections += 1
        try:
            while True:
                try:
                    request = await self._read_request(reader)
                except _BadRequest as exc:
                    await self._json(
                        reader,
                        writer,
                        exc.status,
                        _error_body(exc.status, str(exc)),
                        keep_alive=False,
                    )
                    break
                if request is None or not await self._dispatch(request, reader, writer):
                    break
        except (_Disconnected, OSError, EOFError):
            pass
        except Exception:
            _log.exception("scripted upstream: unexpected error")
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> _Request | None:
        """Parse one request (body by Content-Length); None when the client closed cleanly."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError:
            raise _BadRequest(431, "request headers too large") from None
        lines = head.decode("latin-1").lstrip("\r\n").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            raise _BadRequest(400, "malformed request line") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise _BadRequest(411, "chunked request bodies are not supported; send Content-Length")
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            raise _BadRequest(400, "bad Content-Length") from None
        body = await reader.readexactly(length) if length > 0 else b""
        connection = headers.get("connection", "").lower()
        keep_alive = (
            "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        )
        return _Request(method.upper(), target.split("?", 1)[0], body, keep_alive)

    async def _dispatch(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Route one request; returns whether the connection may be reused."""
        route = (request.method, request.path.rstrip("/") or "/")
        if route == ("POST", "/v1/chat/completions"):
            return await self._chat(request, reader, writer)
        if route == ("GET", "/v1/models"):
            with self._lock:
                self._model_lists += 1
            if self.hang_models:
                await self._hang(reader)
            models = {
                "object": "list",
                "data": [
                    {"id": "scripted", "object": "model", "created": 0, "owned_by": "scripted"}
                ],
            }
            await self._json(reader, writer, 200, models, request.keep_alive)
        elif route == ("GET", "/health"):
            await self._json(reader, writer, 200, {"status": "ok"}, request.keep_alive)
        elif route == ("POST", "/extras/tokenize/count") and self.tokenize:
            try:
                text = json.loads(request.body or b"{}").get("input", "")
                count = len(str(text).split())
            except (ValueError, AttributeError):
                await self._json(
                    reader, writer, 400, _error_body(400, "invalid JSON body"), request.keep_alive
                )
            else:
                await self._json(reader, writer, 200, {"count": count}, request.keep_alive)
        else:
            message = f"no route for {request.method} {request.path}"
            await self._json(reader, writer, 404, _error_body(404, message), request.keep_alive)
        return request.keep_alive

    @staticmethod
    async def _write(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
    ) -> None:
        """Write and flush, turning any sign of a departed client into ``_Disconnected``."""
        if writer.is_closing() or reader.at_eof() or reader.exception() is not None:
            raise _Disconnected
        writer.write(data)
        try:
            await writer.drain()
        except OSError as exc:
            raise _Disconnected from exc

    async def _json(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        status: int,
        obj: dict,
        keep_alive: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        body = json.dumps(obj).encode()
        head = _head(
            status,
            {
                "Content-Type": "application/json",
                "Content-Length": str(len(body)),
                "Connection": "keep-alive" if keep_alive else "close",
                **(headers or {}),
            },
        )
        await self._write(reader, writer, head + body)

    # -- chat completions ------------------------------------------------------------------------

    async def _chat(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        keep_alive = request.keep_alive
        try:
            body = json.loads(request.body or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            await self._json(
                reader, writer, 400, _error_body(400, "body must be a JSON object"), keep_alive
            )
            return keep_alive
        with self._lock:
            self._requests.append(body)
            source = self._script.popleft() if self._script else self.default
        try:
            reply = source if isinstance(source, Reply) else source(body)
        except Exception as exc:
            _log.exception("scripted upstream: reply function failed")
            reply = Reply(status=500, error_message=f"reply function failed: {exc!r}")
        try:
            # The event belongs to the test's thread, not to this loop: polled.
            while reply.held is not None and not reply.held.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            if reply.hang:
                await self._hang(reader)
            if reply.status != 200:
                err = _error_body(reply.status, reply.error_message)
                await self._json(reader, writer, reply.status, err, keep_alive, reply.headers)
            elif body.get("stream"):
                if not await self._stream(body, reply, reader, writer, keep_alive):
                    return False  # cut on purpose: the socket is already closed
            else:
                await self._complete(body, reply, reader, writer, keep_alive)
        except _Disconnected:
            with self._lock:
                self._disconnects += 1
            raise
        with self._lock:
            self._completed += 1
        return keep_alive

    @staticmethod
    async def _hang(reader: asyncio.StreamReader) -> None:
        """Say nothing until the client closes (timeouts, cancellation); stop() cancels us."""
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                data = b""
            if not data:
                raise _Disconnected

    def _usage(self, body: dict, reply: Reply, deltas: int) -> dict[str, int]:
        prompt = (
            reply.prompt_tokens if reply.prompt_tokens is not None else count_prompt_tokens(body)
        )
        completion = reply.completion_tokens if reply.completion_tokens is not None else deltas
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @staticmethod
    def _arg_pieces(arguments: str) -> list[str]:
        return [arguments[i : i + _ARGS_PIECE] for i in range(0, len(arguments), _ARGS_PIECE)]

    async def _complete(
        self,
        body: dict,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> None:
        """Non-streaming ``chat.completion``; delays add up as if the answer had been generated."""
        pieces, calls = reply.pieces(), reply.calls()
        n = len(pieces) + sum(1 + len(self._arg_pieces(c["arguments"])) for c in calls)
        await asyncio.sleep(reply.first_delay + reply.delay * max(0, n - 1))
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(pieces) if pieces or not calls else None,
            "refusal": None,
        }
        if calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or "scripted",
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
                }
            ],
        }
        if reply.usage is not False:
            answer["usage"] = self._usage(body, reply, n)
        await self._json(reader, writer, 200, answer, keep_alive)

    async def _stream(
        self,
        body: dict,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> bool:
        """SSE ``chat.completion.chunk``s the way OpenAI sends them; False if cut on purpose."""
        pieces, calls = reply.pieces(), reply.calls()
        deltas: list[dict[str, Any]] = [{"content": p} for p in pieces]
        for index, call in enumerate(calls):
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            )
            deltas += [
                {"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                for part in self._arg_pieces(call["arguments"])
            ]
        if calls and not pieces:
            # OpenAI puts the role into the first tool-call delta, with content null.
            deltas[0] = {"role": "assistant", "content": None, **deltas[0]}
            lead = None
        else:
            lead = {"role": "assistant", "content": ""}
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        send_usage = include if reply.usage is None else reply.usage
        base = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or "scripted",
            "system_fingerprint": None,
        }

        # Serialise the invariant envelope once; per chunk only the delta is encoded (cheap at
        # hundreds of concurrent streams). The bytes equal json.dumps of the whole chunk.
        prefix = (
            b"data: " + json.dumps(base)[:-1].encode() + b', "choices": [{"index": 0, "delta": '
        )
        usage_null = b', "usage": null' if send_usage else b""

        def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
            rest = b', "logprobs": null, "finish_reason": %s}]%s}\n\n'
            return _chunk(
                prefix
                + json.dumps(delta).encode()
                + rest % (json.dumps(finish).encode(), usage_null)
            )

        with self._lock:
            self._active += 1
            self._peak = max(self._peak, self._active)
        try:
            head = _head(
                200,
                {
                    "Content-Type": "text/event-stream; charset=utf-8",
                    "Cache-Control": "no-cache",
                    "Transfer-Encoding": "chunked",
                    "Connection": "keep-alive" if keep_alive else "close",
                },
            )
            await self._write(reader, writer, head + (frame(lead) if lead else b""))
            limit = reply.cut_after if reply.error_after is None else reply.error_after
            for i, delta in enumerate(deltas if limit is None else deltas[:limit]):
                await asyncio.sleep(reply.first_delay if i == 0 else reply.delay)
                await self._write(reader, writer, frame(delta))
            if reply.error_after is not None:
                # How OpenAI-compatible servers fail once the stream has begun: a 200 already
                # went out, so the error comes as an event, and the body ends.
                error = _error_body(500, reply.error_message)
                await self._write(reader, writer, _sse(error) + b"0\r\n\r\n")
                return True
            if limit is not None:
                writer.close()  # mid-body: no finish chunk, no [DONE], no terminating chunk
                return False
            if not deltas:
                await asyncio.sleep(reply.first_delay)
            finish = reply.finish_reason or ("tool_calls" if calls else "stop")
            tail = frame({}, finish)
            if send_usage:
                usage = self._usage(body, reply, len(deltas))
                tail += _sse({**base, "choices": [], "usage": usage})
            tail += _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
            await self._write(reader, writer, tail)
            return True
        finally:
            with self._lock:
                self._active -= 1


def main(argv: list[str] | None = None) -> None:
    """Serve a fixed default reply until interrupted (a separate process for benchmarks)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--tokens", type=int, default=0, help="answer tok0 tok1 ... (else echo)")
    parser.add_argument("--first-delay", type=float, default=0.0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--tokenize", action="store_true")
    args = parser.parse_args(argv)
    default: ReplySource = echo_reply
    if args.tokens:
        default = Reply(tokens=args.tokens, first_delay=args.first_delay, delay=args.delay)
    with ScriptedUpstream(
        default=default, tokenize=args.tokenize, host=args.host, port=args.port
    ) as up:
        print(f"scripted upstream at {up.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
