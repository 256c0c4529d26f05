"""Database-side helpers, run as `python -m bench.dbtool COMMAND` with the servers' settings.

They run in their own process (not in the load generator) because they need Django configured
against the scratch database. Each prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench import dashdata, datasetdata, evaldata, purgedata, seeding  # noqa: E402
from sessions_app.accounts import create_token  # noqa: E402
from sessions_app.models import (  # noqa: E402
    Agent,
    CallKind,
    LLMCall,
    Message,
    Role,
    Run,
    RunStatus,
    Session,
)
from testkit.querycount import Counted, count_queries  # noqa: E402

User = get_user_model()
BATCH = 2000


def _agent(model: str) -> Agent:
    agent, _ = Agent.objects.update_or_create(
        name=f"bench {model}", defaults={"model": model, "instructions": ""}
    )
    return agent


def fixtures(args: argparse.Namespace) -> dict[str, Any]:
    """The load's user, its token and cookie, one agent per upstream script, and sessions."""
    user = seeding.user("bench")
    agents = {model: str(_agent(model).pk) for model in args.models}
    first = Agent.objects.get(pk=agents[args.models[0]])
    sessions = Session.objects.bulk_create(
        [Session(user=user, agent=first, session_name=f"bench {i}") for i in range(args.sessions)],
        batch_size=BATCH,
    )
    _, token = create_token(user, "bench")
    return {
        "token": token,
        "cookie": seeding.cookie(user),
        "agents": agents,
        "sessions": [str(s.pk) for s in sessions],
    }


# -- figure 3: database work per run --------------------------------------------------------


def _summary(counted: Counted) -> dict[str, int]:
    return {
        "queries": counted.queries,
        "writes": counted.writes,
        "rows_written": counted.rows_written,
        "checkpoints": counted.checkpoints,
    }


async def _parley_run(user: Any, agent: Agent, session_id: Any) -> dict[str, int]:
    from sessions_app import engine

    with count_queries() as counted:
        handle = await engine.start_run(
            user, "count my queries", agent_id=agent.pk, session_id=session_id
        )
        async for event in handle.events():
            if event["event"] in ("RunError", "RunCancelled"):
                raise RuntimeError(f"run failed: {event}")
        await handle.task
    return _summary(counted)


async def _naive_run(user: Any, model: str) -> dict[str, int]:
    from channels.testing import WebsocketCommunicator

    from bench.naive.consumer import NaiveChatConsumer

    communicator = WebsocketCommunicator(NaiveChatConsumer.as_asgi(), "/ws/naive/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    if not connected:
        raise RuntimeError("the naive consumer refused the socket")
    try:
        with count_queries() as counted:
            frame = {"action": "send", "input": "count my queries", "model": model}
            await communicator.send_to(text_data=json.dumps(frame))
            while True:
                text = await communicator.receive_from(timeout=60)
                if 'data-run-status="completed"' in text:
                    break
                if 'data-run-status="error"' in text:
                    raise RuntimeError("naive run failed")
    finally:
        await communicator.disconnect()
    return _summary(counted)


async def _dbwork(models: list[str]) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    user = await sync_to_async(seeding.user)("bench_db")
    agents = {m: await sync_to_async(_agent)(m) for m in models}
    # A session per answer length, each with its agent, so the runs differ only in the answer.
    sessions = {m: await Session.objects.acreate(user=user, agent=agents[m]) for m in models}
    # First-use queries (content types, connection setup) aside, then steady-state runs.
    for model in models:
        await _parley_run(user, agents[model], sessions[model].pk)
    await _naive_run(user, models[0])
    out: dict[str, Any] = {"parley": {}, "naive": {}}
    for model in models:
        out["parley"][model] = await _parley_run(user, agents[model], sessions[model].pk)
        out["naive"][model] = await _naive_run(user, model)
    return out


async def _dbwork_served(models: list[str]) -> dict[str, Any]:
    from sessions_app.engine import lifespan

    async with lifespan.serving():  # as serve runs the engine, on this loop
        return await _dbwork(models)


def dbwork(args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(_dbwork_served(args.models))


# -- figure 4: lists at size ------------------------------------------------------------------


# Every seeded run, and its model call, took this.
SEEDED_METRICS = {
    "input_tokens": 12,
    "output_tokens": 24,
    "total_tokens": 36,
    "duration": 1.5,
    "time_to_first_token": 0.2,
}


def seed(args: argparse.Namespace) -> dict[str, Any]:
    """`sessions` sessions of `runs` runs (two messages each) for `user`, plus sessions of other
    users until the table holds `total_sessions`; timestamps spread out as real data's are.
    Bulk inserts, column by column (`_write`), in one transaction."""
    started = time.perf_counter()
    rng = random.Random(5)
    agent = _agent("bench:20:0")
    owner = seeding.user(args.user)
    staff = seeding.user("bench_staff", staff=True)
    now = timezone.now()
    n = args.sessions
    session_ids = [uuid.uuid4() for _ in range(n)]
    created, updated, names = [], [], []
    for i in range(n):
        at = now - timedelta(days=365) + timedelta(seconds=i * 3000)
        created.append(at)
        updated.append(min(at + timedelta(seconds=rng.randint(0, 3000 * n // 2)), now))
        names.append(f"Conversation {i} about topic {rng.randint(0, 999)}")
    # Runs and their messages, session by session, position by position.
    positions = range(1, args.runs + 1)
    run_ids = [uuid.uuid4() for _ in range(n * args.runs)]
    run_sessions = [sid for sid in session_ids for _ in positions]
    run_positions = [p for _ in session_ids for p in positions]
    run_times = [at + timedelta(seconds=p * 10) for at in created for p in positions]
    inputs = [f"Question {p}" for p in run_positions]
    answers = [f"Answer {p} " * 8 for p in run_positions]
    with transaction.atomic():
        seeding.write(
            Session,
            n,
            {
                "session_id": session_ids,
                "session_name": names,
                "created_at": created,
                "updated_at": updated,
            },
            user=owner,
            agent=agent,
        )
        seeding.write(
            Run,
            len(run_ids),
            {
                "run_id": run_ids,
                "session_id": run_sessions,
                "position": run_positions,
                "input": inputs,
                "content": answers,
                "created_at": run_times,
                "finished_at": run_times,
            },
            user=owner,
            agent=agent,
            status=RunStatus.COMPLETED,
            model=agent.model,
            **SEEDED_METRICS,
        )
        seeding.write(
            Message,
            2 * len(run_ids),
            {
                "run_id": [rid for rid in run_ids for _ in (0, 1)],
                "session_id": [sid for sid in run_sessions for _ in (0, 1)],
                "order": [0, 1] * len(run_ids),
                "role": [Role.USER, Role.ASSISTANT] * len(run_ids),
                "content": [text for pair in zip(inputs, answers, strict=True) for text in pair],
                "created_at": [at for at in run_times for _ in (0, 1)],
            },
        )
        if args.calls:
            seeding.write(
                LLMCall,
                len(run_ids),
                {
                    "run_id": run_ids,
                    "session_id": run_sessions,
                    "created_at": run_times,
                    "cost": [Decimal("0.000018") * (p % 3) for p in run_positions],
                },
                user=owner,
                agent=agent,
                kind=CallKind.CHAT,
                model=agent.model,
                **SEEDED_METRICS,
            )
        others = [seeding.user(f"bench_other{i:03d}") for i in range(args.other_users)]
        missing = max(0, args.total_sessions - Session.objects.count())
        seeding.write(
            Session,
            missing,
            {
                "session_id": [uuid.uuid4() for _ in range(missing)],
                "user_id": [others[i % len(others)].pk for i in range(missing)],
                "session_name": [f"Other conversation {i}" for i in range(missing)],
                "created_at": [now - timedelta(seconds=i * 60) for i in range(missing)],
                "updated_at": [now - timedelta(seconds=i * 30) for i in range(missing)],
            },
            agent=agent,
        )
    seeding.settle()
    _, token = create_token(owner, "bench lists")
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "sessions_total": Session.objects.count(),
        "messages_total": Message.objects.count(),
        "runs_total": Run.objects.count(),
        "user_sessions": Session.objects.filter(user=owner).count(),
        "user_messages": Message.objects.filter(session__user=owner).count(),
        "cookie": seeding.cookie(owner),
        "staff_cookie": seeding.cookie(staff),
        "token": token,
    }


LIST_URLS = {
    "sidebar": "/sessions/",
    "api": "/api/sessions",
    "admin": "/admin/sessions_app/session/",
}


def count_lists(args: argparse.Namespace) -> dict[str, int]:
    """Queries each list request makes (session and user lookups included), after a warm-up."""
    owner, staff = Client(), Client()
    owner.force_login(User.objects.get(username=args.user))
    staff.force_login(User.objects.get(username="bench_staff"))
    return {
        name: _queries(staff if name == "admin" else owner, url) for name, url in LIST_URLS.items()
    }


def _queries(client: Client, url: str) -> int:
    """The queries a page makes once warmed up (session and user lookups included)."""
    client.get(url)
    with count_queries() as counted:
        response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}")
    return counted.queries


def count_pages(args: argparse.Namespace) -> dict[str, int]:
    """Queries each staff page makes (`--urls` NAME=PATH …; `{session}` and `{run}` stand for
    one of `--user`'s), after a warm-up; with the ids it used."""
    staff = Client()
    staff.force_login(User.objects.get(username="bench_staff"))
    run = Run.objects.filter(user__username=args.user).order_by("-created_at").first()
    ids = {"session": run.session_id, "run": run.run_id}
    out: dict[str, Any] = {"ids": {k: str(v) for k, v in ids.items()}}
    for name, _, url in (item.partition("=") for item in args.urls):
        out[name] = _queries(staff, url.format(**ids))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dbtool")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("fixtures")
    p.add_argument("--sessions", type=int, required=True)
    p.add_argument("--models", nargs="+", required=True)
    p = commands.add_parser("dbwork")
    p.add_argument("--models", nargs="+", required=True)
    p = commands.add_parser("seed")
    p.add_argument("--user", required=True)
    p.add_argument("--sessions", type=int, required=True)
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--total-sessions", type=int, default=0)
    p.add_argument("--other-users", type=int, default=100)
    p.add_argument("--calls", action="store_true", help="a model call row per run, priced")
    p = commands.add_parser("count-lists")
    p.add_argument("--user", required=True)
    p = commands.add_parser("count-pages")
    p.add_argument("--user", required=True)
    p.add_argument("--urls", nargs="+", required=True, metavar="NAME=PATH")
    p = commands.add_parser("seed-dashboard")
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--days", type=int, required=True)
    p.add_argument("--slice", type=int, default=0)
    commands.add_parser("count-dashboard")
    p = commands.add_parser("seed-datasets")
    p.add_argument("--items", type=int, required=True)
    p = commands.add_parser("export-dataset")
    p.add_argument("--name", required=True)
    p.add_argument("--format", required=True)
    p = commands.add_parser("seed-expired")
    p.add_argument("--messages", type=int, required=True)
    commands.add_parser("count-expired")
    p = commands.add_parser("seed-eval")
    p.add_argument("--items", type=int, nargs="+", required=True, help="a dataset per size")
    p.add_argument("--tokens", type=int, nargs="+", required=True, help="answers' lengths")
    for command in ("eval-parley", "eval-direct"):
        p = commands.add_parser(command)
        p.add_argument("--name", required=True)
        p.add_argument("--versions", nargs=2, required=True)
        if command == "eval-parley":
            p.add_argument("--trace", action="store_true", help="the heap's peak; not timed")
    args = parser.parse_args()
    handler = {
        "fixtures": fixtures,
        "dbwork": dbwork,
        "seed": seed,
        "count-lists": count_lists,
        "count-pages": count_pages,
        "seed-dashboard": dashdata.seed,
        "count-dashboard": dashdata.count,
        "seed-datasets": datasetdata.seed,
        "export-dataset": datasetdata.measure,
        "seed-expired": purgedata.seed,
        "count-expired": purgedata.count,
        "seed-eval": evaldata.seed,
        "eval-parley": evaldata.measure_parley,
        "eval-direct": evaldata.measure_direct,
    }
    print(json.dumps(handler[args.command](args)), flush=True)


if __name__ == "__main__":
    main()
