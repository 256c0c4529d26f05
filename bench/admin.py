"""Figure 7: the staff's console at size: the admin's changelists, a session's transcript and a
run's page, with 100,000 sessions and 1,000,000 messages (and a priced model call per run),
against the same pages over a hundredth of the data.

Seeded with bulk inserts by the helper process; timed over HTTP against the running Parley
process as a superuser (sequential requests after a warm-up); queries counted in the helper.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from tqdm import tqdm

from bench.context import Bench
from bench.lists import add_size_rows, time_page

REQUESTS = 20
LIMIT = 0.100
PAGES = {
    "sessions": "/admin/sessions_app/session/",
    "sessions with errors": "/admin/sessions_app/session/?has_errors=yes",
    "runs": "/admin/sessions_app/run/",
    "completed runs": "/admin/sessions_app/run/?status__exact=COMPLETED",
    "messages": "/admin/sessions_app/message/",
    "model calls": "/admin/sessions_app/llmcall/",
    "users": "/admin/sessions_app/user/",
    "session transcript": "/admin/sessions_app/session/{session}/change/",
    "run page": "/admin/sessions_app/run/{run}/change/",
}


def sizes(bench: Bench) -> dict[str, dict[str, int]]:
    """Sessions of ten runs (twenty messages) for one user, and every user's sessions in all."""
    if bench.opts.quick:
        return {
            "small": {"sessions": 50, "total": 100},
            "full": {"sessions": 5_000, "total": 10_000},
        }
    return {
        "small": {"sessions": 500, "total": 1_000},
        "full": {"sessions": 50_000, "total": 100_000},
    }


async def _time(base: str, cookie: str, urls: dict[str, str]) -> dict[str, list[float]]:
    headers = {"Cookie": f"sessionid={cookie}"}
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as http:
        return {name: await time_page(http, url, REQUESTS) for name, url in urls.items()}


async def _measure(bench: Bench, user: str, spec: dict[str, int]) -> dict[str, Any]:
    stack = bench.stack
    seeded = await asyncio.to_thread(
        stack.helper,
        "seed", "--user", user, "--calls",
        "--sessions", str(spec["sessions"]), "--runs", "10",
        "--total-sessions", str(spec["total"]),
    )  # fmt: skip
    queries = await asyncio.to_thread(
        stack.helper, "count-pages", "--user", user,
        "--urls", *(f"{name}={url}" for name, url in PAGES.items()),
    )  # fmt: skip
    urls = {name: url.format(**queries["ids"]) for name, url in PAGES.items()}
    times = await _time(stack.url("parley"), seeded["staff_cookie"], urls)
    return {"seeded": seeded, "queries": queries, "times": times}


async def run(bench: Bench) -> None:
    plan = sizes(bench)
    measured: dict[str, dict[str, Any]] = {}
    with tqdm(total=2, desc="fig 7 admin", unit="size") as bar:
        for size, user in (("small", "bench_admin_small"), ("full", "bench_admin")):
            measured[size] = await _measure(bench, user, plan[size])
            bar.update()
    small, full = measured["small"], measured["full"]
    for name in PAGES:
        add_size_rows(bench, "7", f"admin: {name}", name, full, small, LIMIT)
    fs = full["seeded"]
    bench.note(
        f"fig 7: {fs['sessions_total']:,} sessions, {fs['runs_total']:,} runs and "
        f"{fs['messages_total']:,} messages in all, a model call per run; seeding took "
        f"{fs['seconds']} s. Small data: a hundredth of it."
    )
