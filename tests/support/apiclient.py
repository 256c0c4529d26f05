"""Helpers for the REST API tests: authenticated clients, stored runs, an SSE reader."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.test import Client

from sessions_app.accounts import create_token
from sessions_app.models import Agent, CallKind, LLMCall, Message, Role, Run, RunStatus, Session
from tests.support.asgiclient import ASGIClient, StreamedResponse


def bearer(user: Any, name: str = "tests") -> dict[str, str]:
    _, raw = create_token(user, name)
    return {"Authorization": f"Bearer {raw}"}


def api_client(user: Any) -> Client:
    return Client(headers=bearer(user))


def asgi_client(user: Any) -> ASGIClient:
    return ASGIClient(bearer(user))


def default_agent() -> Agent:
    agent, _ = Agent.objects.update_or_create(
        is_default=True, defaults={"name": "Assistant", "model": "scripted", "instructions": ""}
    )
    return agent


def stored_run(
    session: Session,
    question: str,
    answer: str,
    *,
    status: str = RunStatus.COMPLETED,
    tokens: tuple[int, int] = (10, 5),
    at: datetime | None = None,
    **call: Any,
) -> Run:
    """A finished run as the engine leaves it: its two messages and its model call."""
    position = session.runs.count() + 1
    run = Run.objects.create(
        session=session,
        user=session.user,
        agent=session.agent,
        position=position,
        status=status,
        input=question,
        content=answer,
        model=call.get("model", session.agent.model),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_tokens=sum(tokens),
        time_to_first_token=call.get("time_to_first_token", 0.1),
        duration=call.get("duration", 0.5),
    )
    Message.objects.create(run=run, session=session, order=0, role=Role.USER, content=question)
    Message.objects.create(run=run, session=session, order=1, role=Role.ASSISTANT, content=answer)
    llm_call = LLMCall.objects.create(
        run=run,
        session=session,
        user=session.user,
        agent=session.agent,
        kind=call.get("kind", CallKind.CHAT),
        model=run.model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_tokens=sum(tokens),
        time_to_first_token=run.time_to_first_token,
        duration=run.duration,
        cost=call.get("cost"),
        ok=status == RunStatus.COMPLETED,
    )
    if at is not None:
        LLMCall.objects.filter(pk=llm_call.pk).update(created_at=at)
        Run.objects.filter(pk=run.pk).update(created_at=at)
    return run


def parse_sse(lines: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """Events as an EventSource would deliver them: (event type, parsed data)."""
    events: list[tuple[str, dict[str, Any]]] = []
    kind, data = "message", []
    for line in lines:
        if line == "":
            if data:
                events.append((kind, json.loads("\n".join(data))))
            kind, data = "message", []
        elif line.startswith(":"):
            continue  # a comment: keep-alive
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                kind = value
            elif field == "data":
                data.append(value)
    return events


async def read_events(response: StreamedResponse) -> list[tuple[str, dict[str, Any]]]:
    return parse_sse([line async for line in response.lines()])
