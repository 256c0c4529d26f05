"""The HTTP clients that talk to the model endpoint, per event loop: made, shared, closed.

Clients belong to their event loop, since httpx's connection pools do: a loop that first asks
drops the clients of the one before (tests run each on a loop of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import openai
from django.conf import settings

from sessions_app.llm.transport import HTTP

# httpcore's pool looks over every connection it holds, and probes each idle one's socket,
# whenever a request starts or ends: with many streams in one pool that work grows with the
# square of their number. So requests fill one client's pool up to this many at a time, then
# the next; a quiet server uses only the first and keeps reusing its connections.
POOL_SIZE = 8


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


_endpoint: _Endpoint | None = None
_tls: ssl.SSLContext | None = None
_tokenizer_clients: dict[int, httpx.AsyncClient] = {}


@contextlib.contextmanager
def client_for_request(url: str, key: str) -> Iterator[openai.AsyncOpenAI]:
    """A model client for one request to `url`: the first with room in its pool."""
    global _endpoint
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


def tokenizer_client() -> httpx.AsyncClient:
    """This loop's client for the endpoint's tokenizer (llama.cpp's, not `openai`'s API)."""
    loop_id = id(asyncio.get_running_loop())
    http = _tokenizer_clients.get(loop_id)
    if http is None:
        http = httpx.AsyncClient(timeout=5.0)
        _tokenizer_clients.clear()
        _tokenizer_clients[loop_id] = http
    return http


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


def _tls_context() -> ssl.SSLContext:
    """The HTTP library's default TLS context, made once: making it loads the CA bundle, on the
    event loop, which would otherwise be done again for every new client."""
    global _tls
    if _tls is None:
        _tls = HTTP.create_ssl_context()
    return _tls
