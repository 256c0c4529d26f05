"""Figure 4: the lists that grow with a user's history: the sidebar, GET /api/sessions, and the
admin changelist of every session, at a small size (the reference) and at full size.

Seeded with bulk inserts by the helper process; timed over HTTP against the running Parley
process (sequential requests after a warm-up); queries counted in the helper with Django's test
client, session and user lookups included.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from tqdm import tqdm

from bench.context import Bench
from bench.report import Row
from bench.stats import p50, p95

REQUESTS = 30
WARMUP = 3
LIMIT = 0.050
NAMES = {"sidebar": "sidebar page", "api": "GET /api/sessions", "admin": "admin changelist"}
URLS = {
    "sidebar": "/sessions/",
    "api": "/api/sessions",
    "admin": "/admin/sessions_app/session/",
}


def sizes(bench: Bench) -> dict[str, dict[str, int]]:
    if bench.opts.quick:
        return {
            "small": {"sessions": 10, "runs": 10, "total": 0},
            "full": {"sessions": 1_000, "runs": 10, "total": 10_000},
        }
    return {
        "small": {"sessions": 100, "runs": 10, "total": 0},
        "full": {"sessions": 10_000, "runs": 10, "total": 100_000},
    }


async def time_page(
    http: httpx.AsyncClient, url: str, requests: int, headers: dict[str, str] | None = None
) -> list[float]:
    """The seconds of `requests` sequential GETs of `url`, after WARMUP untimed ones; any
    answer but 200 stops the figure."""
    times = []
    for i in range(WARMUP + requests):
        started = time.perf_counter()
        response = await http.get(url, headers=headers)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        if i >= WARMUP:
            times.append(elapsed)
    return times


async def _time(base: str, seeded: dict[str, Any], requests: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        for name, url in URLS.items():
            if name == "api":
                headers = {"Authorization": f"Bearer {seeded['token']}"}
            else:
                cookie = seeded["staff_cookie"] if name == "admin" else seeded["cookie"]
                headers = {"Cookie": f"sessionid={cookie}"}
            out[name] = await time_page(http, url, requests, headers)
    return out


def add_size_rows(
    bench: Bench,
    figure: str,
    label: str,
    name: str,
    full: dict[str, Any],
    small: dict[str, Any],
    limit: float,
) -> None:
    """A page's time at full size against small data, with its target, and its queries."""
    mine, ref = full["times"][name], small["times"][name]
    bench.add(
        Row(
            figure,
            f"{label} time",
            "ms",
            (p50(mine), p95(mine)),
            "small data",
            (p50(ref), p95(ref)),
            target=f"p50 ≤ {limit * 1000:.0f} ms",
            passed=p50(mine) <= limit,
        )
    )
    bench.add(
        Row(
            figure,
            f"{label} queries",
            "queries",
            (full["queries"][name], None),
            "small data",
            (small["queries"][name], None),
        )
    )


async def run(bench: Bench) -> None:
    stack = bench.stack
    plan = sizes(bench)
    measured: dict[str, dict[str, Any]] = {}
    bar = tqdm(total=4, desc="fig 4 lists", unit="step")
    try:
        for size, user in (("small", "bench_small"), ("full", "bench_lists")):
            spec = plan[size]
            bar.set_postfix_str(f"seeding {size}")
            seeded = await asyncio.to_thread(
                stack.helper,
                "seed",
                "--user",
                user,
                "--sessions",
                str(spec["sessions"]),
                "--runs",
                str(spec["runs"]),
                "--total-sessions",
                str(spec["total"]),
            )
            bar.update()
            bar.set_postfix_str(f"timing {size}")
            queries = await asyncio.to_thread(stack.helper, "count-lists", "--user", user)
            times = await _time(stack.url("parley"), seeded, REQUESTS)
            measured[size] = {"seeded": seeded, "queries": queries, "times": times}
            bar.update()
    finally:
        bar.close()
    small, full = measured["small"], measured["full"]
    for name in URLS:
        add_size_rows(bench, "4", NAMES[name], name, full, small, LIMIT)
    fs, ss = full["seeded"], small["seeded"]
    bench.note(
        f"fig 4: full size = one user with {fs['user_sessions']:,} sessions and "
        f"{fs['user_messages']:,} messages, {fs['sessions_total']:,} sessions in all (admin); "
        f"small = {ss['user_sessions']:,} sessions, {ss['user_messages']:,} messages, "
        f"{ss['sessions_total']:,} in all. Seeding took {fs['seconds']} s."
    )
