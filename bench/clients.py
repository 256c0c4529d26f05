"""The load generator's clients: one run over the upstream directly, over SSE, over a WebSocket.

All three record the same things the same way (monotonic clock, from the moment the request is
sent), so their numbers can be divided by each other. Every wait is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from websockets.asyncio.client import ClientConnection, connect

PIECE = 'hx-swap-oob="beforeend:#run-'
FAILED_STATUSES = ('data-run-status="error"', 'data-run-status="interrupted"')
NOTICE = 'data-testid="chat-notice"'
CONNECT_TIMEOUT = 30.0


@dataclass
class RunResult:
    ok: bool = False
    error: str = ""
    ttft: float | None = None  # seconds from sending the request to the first piece of text
    total: float | None = None  # seconds from sending the request to the end of the answer
    pieces: list[float] = field(default_factory=list)  # arrival of each piece, from the send
    frames: int = 0  # WebSocket frames (or SSE events) received for this run
    bytes: int = 0  # their payload bytes

    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.pieces, self.pieces[1:], strict=False)]

    def piece(self, at: float) -> None:
        """A piece of the answer arrived `at` seconds after the request was sent."""
        if self.ttft is None:
            self.ttft = at
        self.pieces.append(at)

    def end(self, at: float, content: str, tokens: int) -> None:
        """The answer ended, whole if it ends with the upstream's last token."""
        self.total = at
        self.ok = content.rstrip().endswith(expected_tail(tokens))
        self.error = "" if self.ok else "incomplete answer"


def expected_tail(tokens: int) -> str:
    """The scripted upstream's last token: a run that shows it was delivered in full."""
    return f"tok{tokens - 1}"


# daphne (Twisted's HTTP server) closes a connection idle for a minute; nginx in front of
# `serve --workers N` closes one idle for 50 s (deploy/nginx/parley-proxy.conf).
SERVER_IDLE_TIMEOUT = 60.0
NGINX_IDLE_TIMEOUT = 50.0


def _limits(expiry: float | None = None) -> httpx.Limits:
    """One connection, kept while the benchmark runs: each client object is one simulated user,
    as a browser tab or a script would be. One pool shared by many streams would make the load
    generator itself slow: httpcore scans every connection in a pool, and each idle one again,
    whenever a request starts or ends; and with httpx's five-second expiry a round would
    reconnect or not depending on how long the rounds before it had taken.

    `expiry`, for a server that closes idle connections: let one go a little before the server
    would. On a slow machine a connection can sit idle that long between batches, and a request
    sent on a connection daphne is closing at that moment fails with ReadError. A POST is not
    retried, by httpx or anyone."""
    return httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=expiry)


class DirectClient:
    """The reference: the `openai` client reading the scripted upstream itself, the way Parley's
    model client does (`client.post` answered with the HTTP response, each `data:` line parsed
    as JSON), so that what Parley adds is all that separates the two.

    Not the typed `chat.completions.create()`: it builds a model object of every chunk, which at
    many fast streams makes this client, not the upstream, the limit, and no floor at all.
    """

    def __init__(self, base_url: str, timeout: float) -> None:
        self.http = httpx.AsyncClient(limits=_limits(), timeout=timeout)
        self.client = openai.AsyncOpenAI(
            base_url=base_url, api_key="bench", max_retries=0, http_client=self.http
        )

    async def connect(self) -> None:
        """Open the connection (and whatever `openai` sets up on first use) before the first
        recorded run, as the WebSocket clients open their sockets."""
        await self.client.models.list()

    async def run(self, model: str, prompt: str, tokens: int, limit: float) -> RunResult:
        result = RunResult()
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        started = time.perf_counter()
        text: list[str] = []
        try:
            async with asyncio.timeout(limit):
                response = await self.client.post(
                    "/chat/completions", cast_to=httpx.Response, body=body, stream=True
                )
                try:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        result.frames += 1
                        choices = json.loads(line[6:]).get("choices")
                        content = choices and (choices[0].get("delta") or {}).get("content")
                        if content:
                            now = time.perf_counter() - started
                            if result.ttft is None:
                                result.ttft = now
                            result.pieces.append(now)
                            text.append(content)
                finally:
                    await response.aclose()
            result.total = time.perf_counter() - started
            result.ok = "".join(text).rstrip().endswith(expected_tail(tokens))
            result.error = "" if result.ok else "incomplete answer"
        except Exception as exc:  # a failed run is a data point, not a crash
            result.error = repr(exc)
        return result

    async def close(self) -> None:
        await self.client.close()


class SSEClient:
    """Parley's REST API: POST /api/runs with "stream": true, read as text/event-stream."""

    def __init__(
        self, base_url: str, token: str, timeout: float, idle: float = SERVER_IDLE_TIMEOUT
    ) -> None:
        """`idle`: how long the server keeps an idle connection."""
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            limits=_limits(expiry=idle - 10),
            timeout=timeout,
        )

    async def connect(self) -> None:
        """Open the connection before the first recorded run, as `DirectClient.connect`."""
        response = await self.http.get("/api/agents")
        response.raise_for_status()

    PATH = "/api/runs"
    UNENDED = "the stream ended without RunCompleted"

    def request(self, agent_id: str, session_id: str, prompt: str) -> tuple[dict, dict]:
        """The body and headers of one run's request."""
        body = {"input": prompt, "agent_id": agent_id, "session_id": session_id, "stream": True}
        return body, {}

    def reader(self, tokens: int, started: float) -> Callable[[str, RunResult], None]:
        """What reads each line of one run's stream into its result: `event:` and `data:`."""
        event = ""

        def read(line: str, result: RunResult) -> None:
            nonlocal event
            if line.startswith("event: "):
                event = line[7:]
                result.frames += 1
            elif line.startswith("data: "):
                if event == "RunContent":
                    result.piece(time.perf_counter() - started)
                elif event == "RunCompleted":
                    content = json.loads(line[6:]).get("content", "")
                    result.end(time.perf_counter() - started, content, tokens)
                elif event in ("RunError", "RunCancelled"):
                    result.error = f"{event}: {line[6:200]}"

        return read

    async def run(
        self, agent_id: str, session_id: str, prompt: str, tokens: int, limit: float
    ) -> RunResult:
        result = RunResult()
        body, headers = self.request(agent_id, session_id, prompt)
        started = time.perf_counter()
        read = self.reader(tokens, started)
        try:
            async with (
                asyncio.timeout(limit),
                self.http.stream("POST", self.PATH, json=body, headers=headers) as response,
            ):
                if response.status_code != 200:
                    await response.aread()
                    result.error = f"{response.status_code} {response.text[:200]}"
                    return result
                # Read to the end of the body (the server ends it after the last event), so the
                # connection is reused, as the Direct client's is.
                async for line in response.aiter_lines():
                    result.bytes += len(line) + 1
                    read(line, result)
            if not result.ok and not result.error:
                result.error = self.UNENDED
        except Exception as exc:
            result.error = repr(exc)
        return result

    async def close(self) -> None:
        await self.http.aclose()


class OpenAIClient(SSEClient):
    """Parley's OpenAI-compatible door: POST /v1/chat/completions with "stream": true, the
    session named by its header, read as OpenAI's chunks."""

    PATH = "/v1/chat/completions"
    UNENDED = "the stream ended without a finish_reason"

    def request(self, agent_id: str, session_id: str, prompt: str) -> tuple[dict, dict]:
        body = {
            "model": agent_id,
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
        }
        return body, {"X-Parley-Session-Id": session_id}

    def reader(self, tokens: int, started: float) -> Callable[[str, RunResult], None]:
        parts: list[str] = []

        def read(line: str, result: RunResult) -> None:
            if not line.startswith("data: ") or line == "data: [DONE]":
                return
            result.frames += 1
            chunk = json.loads(line[6:])
            if "error" in chunk:
                result.error = f"error: {line[6:200]}"
                return
            choice = chunk["choices"][0] if chunk["choices"] else {}
            if choice.get("delta", {}).get("content"):
                result.piece(time.perf_counter() - started)
                parts.append(choice["delta"]["content"])
            if choice.get("finish_reason"):
                result.end(time.perf_counter() - started, "".join(parts), tokens)

        return read


class ChatSocket:
    """One browser tab's WebSocket: Parley's /ws/chat/ or the baseline's /ws/naive/."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, base_url: str, path: str, cookie: str) -> ChatSocket:
        origin = base_url
        ws = await connect(
            base_url.replace("http://", "ws://") + path,
            origin=origin,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={cookie}"},
            # What Parley is sent, uncompressed; and no pings that could time out under load.
            compression=None,
            ping_interval=None,
            max_size=None,
            open_timeout=CONNECT_TIMEOUT,
        )
        return cls(ws)

    async def watch(self, session_id: str) -> None:
        """Parley: show this session first, so a send later is only a send."""
        await self.ws.send(json.dumps({"action": "watch", "session_id": session_id}))
        async with asyncio.timeout(CONNECT_TIMEOUT):
            while 'id="composer-actions"' not in str(await self.ws.recv()):
                pass

    async def run(self, frame: dict[str, Any], tokens: int, limit: float) -> RunResult:
        result = RunResult()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(limit):
                await self.ws.send(json.dumps(frame))
                while True:
                    text = str(await self.ws.recv())
                    result.frames += 1
                    result.bytes += len(text.encode())
                    if 'data-run-status="completed"' in text:
                        result.total = time.perf_counter() - started
                        result.ok = expected_tail(tokens) in text
                        result.error = "" if result.ok else "incomplete answer"
                        break
                    if PIECE in text:
                        now = time.perf_counter() - started
                        if result.ttft is None:
                            result.ttft = now
                        result.pieces.append(now)
                    elif NOTICE in text or any(s in text for s in FAILED_STATUSES):
                        result.error = text[:300]
                        break
        except Exception as exc:
            result.error = repr(exc)
        return result

    async def close(self) -> None:
        try:
            async with asyncio.timeout(5):
                await self.ws.close()
        except Exception:
            pass


async def open_sockets(
    n: int, base_url: str, path: str, cookie: str, watch: list[str] | None = None
) -> list[ChatSocket]:
    """Open n sockets, 50 handshakes at a time (a crowd arriving, not a single burst)."""
    gate = asyncio.Semaphore(50)

    async def one(i: int) -> ChatSocket:
        async with gate:
            sock = await ChatSocket.open(base_url, path, cookie)
            if watch is not None:
                try:
                    await sock.watch(watch[i])
                except BaseException:
                    await sock.close()
                    raise
            return sock

    opened = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    sockets = [s for s in opened if isinstance(s, ChatSocket)]
    failed = [s for s in opened if not isinstance(s, ChatSocket)]
    if failed:
        await close_sockets(sockets)
        raise RuntimeError(f"{len(failed)} of {n} sockets could not open: {failed[0]!r}")
    return sockets


async def close_sockets(sockets: list[ChatSocket]) -> None:
    await asyncio.gather(*(s.close() for s in sockets))


async def connect_all(clients: list[DirectClient] | list[SSEClient]) -> None:
    await asyncio.gather(*(c.connect() for c in clients))


def close_all(clients: list[DirectClient] | list[SSEClient]) -> Callable[[], Awaitable[None]]:
    """How to let a list of HTTP clients go, when their figure is done with them."""

    async def close() -> None:
        await asyncio.gather(*(c.close() for c in clients))

    return close
