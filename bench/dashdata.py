"""Figure 6's data: a server's worth of history for the metrics dashboard, seeded in slices.

Each slice is `runs` runs in sessions of RUNS_PER_SESSION, spread at random over the last `days`
days, with one chat call per run and a title call per session; bulk inserts, no model objects
(bench.seeding.write). Called by bench.dbtool, which has configured Django.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.test import Client
from django.utils import timezone

from bench import seeding
from sessions_app.models import Agent, CallKind, LLMCall, RolledDay, Run, RunStatus, Session
from testkit.querycount import count_queries

RUNS_PER_SESSION = 10
USERS = 1000
MODELS = ["gpt-4o-mini", "gpt-4o", "llama-3.1-8b", "qwen-2.5-7b"]
# Per million tokens in and out, as LLM_PRICES would price them; the local models are free.
PRICES = {"gpt-4o-mini": (0.15, 0.60), "gpt-4o": (2.50, 10.00)}
STATUSES = [RunStatus.COMPLETED] * 46 + [
    RunStatus.ERROR,
    RunStatus.CANCELLED,
    RunStatus.INTERRUPTED,
]
URL = "/admin/dashboard/"


def _cost(model: str, tokens_in: int, tokens_out: int) -> Decimal | None:
    price = PRICES.get(model)
    if price is None:
        return None
    return Decimal(f"{(tokens_in * price[0] + tokens_out * price[1]) / 1e6:.6f}")


def seed(args: argparse.Namespace) -> dict[str, Any]:
    """One slice of `runs` runs; `slice` seeds the random numbers, so slices differ."""
    started = time.perf_counter()
    rng = random.Random(args.slice)
    users = [seeding.user(f"dash_user{i:04d}") for i in range(USERS)]
    agents = [
        Agent.objects.update_or_create(name=f"dash agent {i}", defaults={"model": model})[0]
        for i, model in enumerate([*MODELS, MODELS[0]])
    ]
    now = timezone.now()
    n = args.runs // RUNS_PER_SESSION
    sessions = [uuid.uuid4() for _ in range(n)]
    owners = [rng.choice(users) for _ in range(n)]
    helpers = [rng.choice(agents) for _ in range(n)]
    opened = [now - timedelta(seconds=rng.uniform(0, args.days * 86400)) for _ in range(n)]
    runs = [
        {
            "run_id": uuid.uuid4(), "session": s, "position": p, "created_at": opened[s]
            + timedelta(seconds=90 * p), "status": rng.choice(STATUSES),
            "tokens": (rng.randint(50, 3000), rng.randint(10, 800)),
            "ttft": rng.lognormvariate(-1, 0.6), "duration": rng.lognormvariate(1, 0.7),
            "rating": rng.choice([1, 1, 1, -1]) if rng.random() < 0.1 else None,
        }
        for s in range(n)
        for p in range(1, RUNS_PER_SESSION + 1)
    ]  # fmt: skip
    with transaction.atomic():
        seeding.write(
            Session,
            n,
            {
                "session_id": sessions,
                "user_id": [u.pk for u in owners],
                "agent_id": [a.pk for a in helpers],
                "session_name": [f"Dashboard conversation {args.slice}-{i}" for i in range(n)],
                "created_at": opened,
                "updated_at": opened,
            },
        )
        _write_runs(runs, sessions, owners, helpers)
        _write_calls(runs, sessions, owners, helpers)
    seeding.settle()
    return {"seconds": round(time.perf_counter() - started, 1), "runs": Run.objects.count()}


def _write_runs(runs: list[dict[str, Any]], sessions: list, owners: list, helpers: list) -> None:
    def column(name: str) -> list[Any]:
        return [r[name] for r in runs]

    rated = [r["rating"] is not None for r in runs]
    seeding.write(
        Run,
        len(runs),
        {
            "run_id": column("run_id"),
            "session_id": [sessions[r["session"]] for r in runs],
            "user_id": [owners[r["session"]].pk for r in runs],
            "agent_id": [helpers[r["session"]].pk for r in runs],
            "model": [helpers[r["session"]].model for r in runs],
            "position": column("position"),
            "status": column("status"),
            "created_at": column("created_at"),
            "finished_at": [r["created_at"] + timedelta(seconds=r["duration"]) for r in runs],
            "input_tokens": [r["tokens"][0] for r in runs],
            "output_tokens": [r["tokens"][1] for r in runs],
            "total_tokens": [sum(r["tokens"]) for r in runs],
            "time_to_first_token": column("ttft"),
            "duration": column("duration"),
            "error": ["upstream timed out" if r["status"] == RunStatus.ERROR else "" for r in runs],
            "feedback_rating": column("rating"),
            "feedback_at": [
                r["created_at"] + timedelta(minutes=5) if on else None
                for r, on in zip(runs, rated, strict=True)
            ],
        },
        input="How do I make the most of this?",
        content="Here is a thorough answer. " * 10,
    )


def _write_calls(runs: list[dict[str, Any]], sessions: list, owners: list, helpers: list) -> None:
    firsts = [r for r in runs if r["position"] == 1]
    calls = [(r, CallKind.CHAT) for r in runs] + [(r, CallKind.TITLE) for r in firsts]
    tokens = [r["tokens"] if kind == CallKind.CHAT else (120, 8) for r, kind in calls]
    models = [helpers[r["session"]].model for r, _ in calls]
    seeding.write(
        LLMCall,
        len(calls),
        {
            "run_id": [r["run_id"] if kind == CallKind.CHAT else None for r, kind in calls],
            "session_id": [sessions[r["session"]] for r, _ in calls],
            "user_id": [owners[r["session"]].pk for r, _ in calls],
            "agent_id": [helpers[r["session"]].pk for r, _ in calls],
            "kind": [kind for _, kind in calls],
            "model": models,
            "input_tokens": [t[0] for t in tokens],
            "output_tokens": [t[1] for t in tokens],
            "total_tokens": [sum(t) for t in tokens],
            "time_to_first_token": [r["ttft"] if k == CallKind.CHAT else None for r, k in calls],
            "duration": [r["duration"] if k == CallKind.CHAT else 0.4 for r, k in calls],
            "cost": [_cost(m, *t) for m, t in zip(models, tokens, strict=True)],
            "ok": [r["status"] != RunStatus.ERROR or k != CallKind.CHAT for r, k in calls],
            "created_at": [
                r["created_at"] + timedelta(seconds=1 if k == CallKind.CHAT else r["duration"] + 1)
                for r, k in calls
            ],
        },
    )


def count(args: argparse.Namespace) -> dict[str, Any]:
    """The staff cookie for timing, how long the first page after seeding took (it rolls up
    the closed days of its range), and the queries one page makes after it."""
    staff = seeding.user("dash_staff", staff=True)
    client = Client()
    client.force_login(staff)
    out: dict[str, Any] = {"cookie": seeding.cookie(staff)}
    started = time.perf_counter()
    if client.get(URL).status_code != 200:
        raise RuntimeError(f"{URL} failed on its first reading")
    out["first_seconds"] = time.perf_counter() - started
    out["rolled_days"] = RolledDay.objects.count()
    with count_queries() as counted:
        response = client.get(URL)
    if response.status_code != 200:
        raise RuntimeError(f"{URL} answered {response.status_code}")
    out["queries"] = counted.queries
    out["calls"] = LLMCall.objects.count()
    return out
