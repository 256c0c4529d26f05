"""A chat consumer as tutorials write it: the generation runs inside receive(), every token is
saved to the database as it arrives and sent to the browser as its own frame.

Kept honest rather than strawman: it uses the async `openai` client, the async ORM, escapes every
token and speaks the same HTML-fragment protocol as Parley's consumer, so the benchmark's client
reads both the same way. It sends only the new message (no history), which favours it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils.html import escape
from openai import AsyncOpenAI

from bench.naive.models import NaiveMessage

_client: AsyncOpenAI | None = None


def client() -> AsyncOpenAI:
    global _client
    if _client is None:
        _client = AsyncOpenAI(
            base_url=settings.LLM_BASE_URL, api_key=settings.LLM_API_KEY or "x", max_retries=0
        )
    return _client


class NaiveChatConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: Any = None) -> None:
        data = json.loads(text_data or "{}")
        conversation = data.get("session_id") or uuid.uuid4().hex
        prompt = data.get("input") or ""
        await NaiveMessage.objects.acreate(conversation=conversation, role="user", content=prompt)
        answer = await NaiveMessage.objects.acreate(
            conversation=conversation, role="assistant", content=""
        )
        run = f"run-{answer.pk}"
        await self.send(
            text_data=f'<div class="msg user">{escape(prompt)}</div>'
            f'<article id="{run}" data-run-status="running"><span id="{run}-text"></span>'
            "</article>"
        )
        try:
            stream = await client().chat.completions.create(
                model=data.get("model") or settings.LLM_MODEL,
                messages=[{"role": "user", "content": prompt}],
                stream=True,
            )
            async for chunk in stream:
                token = chunk.choices[0].delta.content if chunk.choices else None
                if not token:
                    continue
                answer.content += token
                await answer.asave(update_fields=["content"])
                await self.send(
                    text_data=f'<span hx-swap-oob="beforeend:#{run}-text">{escape(token)}</span>'
                )
            status = "completed"
        except Exception:
            status = "error"
        await self.send(
            text_data=f'<article id="{run}" data-run-status="{status}" hx-swap-oob="outerHTML">'
            f"{escape(answer.content)}</article>"
        )
