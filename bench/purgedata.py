"""Figure 11's helper side: a backlog of conversations past their retention period, seeded
with bulk inserts for the purge to delete. Called by bench.dbtool, which has configured Django.

Each expired session has RUNS_PER_SESSION runs, each its two messages and one model call (the
calls stay when the purge deletes their run: it clears their text), idle for 400 days, owned
by people other than the load's user.
"""

from __future__ import annotations

import argparse
import time
import uuid
from datetime import timedelta
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from bench import seeding
from sessions_app.models import Agent, CallKind, LLMCall, Message, Role, Run, RunStatus, Session

RUNS_PER_SESSION = 25
CHUNK = 1000  # sessions written per transaction
PEOPLE = 50
AGENT = "bench expired"


def seed(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    agent, _ = Agent.objects.get_or_create(name=AGENT, defaults={"model": "m"})
    people = [seeding.user(f"bench_old{i:02d}") for i in range(PEOPLE)]
    sessions = max(1, args.messages // (2 * RUNS_PER_SESSION))
    idle = timezone.now() - timedelta(days=400)
    for first in range(0, sessions, CHUNK):
        count = min(CHUNK, sessions - first)
        with transaction.atomic():
            _write(agent, [people[(first + i) % PEOPLE] for i in range(count)], idle)
    seeding.settle()
    _checkpoint()
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "sessions": Session.objects.filter(agent=agent).count(),
        "messages": Message.objects.filter(session__agent=agent).count(),
    }


def _write(agent: Agent, owners: list[Any], idle: Any) -> None:
    n = len(owners)
    session_ids = [str(uuid.uuid4()) for _ in range(n)]
    seeding.write(
        Session,
        n,
        {
            "session_id": session_ids,
            "user_id": [owner.pk for owner in owners],
            "session_name": [f"Old conversation {i}" for i in range(n)],
            "created_at": [idle] * n,
            "updated_at": [idle] * n,
        },
        agent=agent,
    )
    positions = range(1, RUNS_PER_SESSION + 1)
    run_ids = [uuid.uuid4() for _ in range(n * RUNS_PER_SESSION)]
    run_sessions = [sid for sid in session_ids for _ in positions]
    run_users = [owner.pk for owner in owners for _ in positions]
    seeding.write(
        Run,
        len(run_ids),
        {
            "run_id": run_ids,
            "session_id": run_sessions,
            "user_id": run_users,
            "position": [p for _ in session_ids for p in positions],
            "created_at": [idle] * len(run_ids),
            "finished_at": [idle] * len(run_ids),
        },
        agent=agent,
        status=RunStatus.COMPLETED,
        input="An old question",
        content="An old answer " * 8,
        model="m",
        total_tokens=40,
    )
    seeding.write(
        Message,
        2 * len(run_ids),
        {
            "run_id": [rid for rid in run_ids for _ in (0, 1)],
            "session_id": [sid for sid in run_sessions for _ in (0, 1)],
            "order": [0, 1] * len(run_ids),
            "role": [Role.USER, Role.ASSISTANT] * len(run_ids),
            "content": ["An old question", "An old answer " * 8] * len(run_ids),
            "created_at": [idle] * (2 * len(run_ids)),
        },
    )
    seeding.write(
        LLMCall,
        len(run_ids),
        {
            "run_id": run_ids,
            "run_uuid": run_ids,
            "session_id": run_sessions,
            "user_id": run_users,
            "created_at": [idle] * len(run_ids),
        },
        agent=agent,
        kind=CallKind.CHAT,
        model="m",
        total_tokens=40,
        sent_messages=[{"role": "user", "content": "An old question"}],
    )


def count(args: argparse.Namespace) -> dict[str, Any]:
    """The messages of the expired backlog still there."""
    return {"messages": Message.objects.filter(session__agent__name=AGENT).count()}


def _checkpoint() -> None:
    """SQLite: the seeded rows moved from the write-ahead log into the database file now, not
    by the server's first commit in the middle of a measured round."""
    connection = connections["default"]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
