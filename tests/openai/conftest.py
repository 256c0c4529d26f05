"""Clients of the `/v1` doors: the real `openai` SDK, speaking ASGI to Parley's application on
the test's loop (where the run engine serves), as it would speak HTTP to a server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from asgiref.sync import sync_to_async

from project.asgi import application
from sessions_app.accounts import create_token


def sdk(raw_token: str) -> openai.AsyncOpenAI:
    transport = httpx.ASGITransport(app=application)
    return openai.AsyncOpenAI(
        base_url="http://testserver/v1",
        api_key=raw_token,
        http_client=httpx.AsyncClient(transport=transport, base_url="http://testserver"),
        max_retries=0,
    )


@pytest.fixture
async def alice_key(alice) -> str:
    _, raw = await sync_to_async(create_token)(alice, "sdk")
    return raw


@pytest.fixture
async def client(alice_key, agent, upstream) -> AsyncIterator[openai.AsyncOpenAI]:
    async with sdk(alice_key) as found:
        yield found
