"""`python -m bench.sidebyside WHAT NAME=VALUE ...`: what fig 1's rounds (`--against`) do not
reach, side by side in one run: two Parley processes on one scratch database, A as configured and
B with the settings named, taking turns.

- `admin`: the admin's sessions and runs lists (500 sessions of ten runs), request by request;
- `start`: A and B started in turn, eight times each, and the first request each answers;
- `solo`: one SSE client running paced 20-token answers, one at a time.

Prints the median and interquartile range of each; used for docs/performance.md.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import httpx

from bench.clients import SSEClient
from bench.context import PROMPT
from bench.procs import cpu_seconds
from bench.servers import Stack

APP, SETTINGS = "project.asgi:application", "project.settings"


def spread(times: list[float]) -> str:
    q = statistics.quantiles(times, n=4)
    return f"p50 {statistics.median(times) * 1000:.1f} ms, IQR {(q[2] - q[0]) * 1000:.1f} ms"


def admin(stack: Stack, b: dict[str, str], rounds: int = 200) -> None:
    seeded = stack.helper(
        "seed", "--user", "owner", "--calls", "--sessions", "500", "--runs", "10",
        "--total-sessions", "1000",
    )  # fmt: skip
    stack.start_daphne("a", APP, SETTINGS)
    stack.start_daphne("b", APP, SETTINGS, **b)
    cookies = {"sessionid": seeded["staff_cookie"]}
    for page in ("/admin/sessions_app/session/", "/admin/sessions_app/run/"):
        times: dict[str, list[float]] = {"a": [], "b": []}
        cpu = {"a": 0.0, "b": 0.0}
        clients = {n: httpx.Client(base_url=stack.url(n), cookies=cookies) for n in times}
        for r in range(5 + rounds):
            for name in ("a", "b") if r % 2 else ("b", "a"):
                before, started = cpu_seconds(stack.pid(name)), time.perf_counter()
                assert clients[name].get(page).status_code == 200
                if r >= 5:
                    times[name].append(time.perf_counter() - started)
                    cpu[name] += cpu_seconds(stack.pid(name)) - before
        for client in clients.values():
            client.close()
        for name, label in (("a", "A"), ("b", "B")):
            per = cpu[name] / rounds * 1000
            print(f"{page} {label}: {spread(times[name])}, server CPU {per:.1f} ms a request")


def start(stack: Stack, b: dict[str, str], rounds: int = 8) -> None:
    times: dict[str, list[float]] = {"a": [], "b": []}
    for r in range(rounds):
        for name in ("a", "b") if r % 2 else ("b", "a"):
            stack.start_daphne(name, APP, SETTINGS, **(b if name == "b" else {}))
            started = time.perf_counter()
            assert httpx.get(stack.url(name) + "/api/sessions").status_code == 401
            times[name].append(time.perf_counter() - started)
            stack.stop(name)
    for name, label in (("a", "A"), ("b", "B")):
        print(f"first request after start {label}: {spread(times[name])}")


async def _solo(stack: Stack, data: dict[str, Any], rounds: int, model: str) -> None:
    clients = {n: SSEClient(stack.url(n), data["token"], 60) for n in ("a", "b")}
    sessions, agent = iter(data["sessions"]), data["agents"][model]
    ttft: dict[str, list[float]] = {"a": [], "b": []}
    gaps: dict[str, list[float]] = {"a": [], "b": []}
    for r in range(2 + rounds):
        for name in ("a", "b") if r % 2 else ("b", "a"):
            result = await clients[name].run(agent, next(sessions), PROMPT, 20, 60)
            assert result.ok, result.error
            if r >= 2 and result.ttft is not None:
                ttft[name].append(result.ttft)
                gaps[name] += result.gaps()
    for name, label in (("a", "A"), ("b", "B")):
        late = sum(g > 0.07 for g in gaps[name])
        print(
            f"one SSE client, paced {label}: TTFT {spread(ttft[name])}; gaps between pieces "
            f"{spread(gaps[name])}, {late} of {len(gaps[name])} over 70 ms"
        )
    for client in clients.values():
        await client.close()


def solo(stack: Stack, b: dict[str, str], rounds: int = 40) -> None:
    model = "bench:20:0.05"
    stack.start_upstream()
    data = stack.helper("fixtures", "--sessions", str(2 * rounds + 10), "--models", model)
    stack.start_daphne("a", APP, SETTINGS)
    stack.start_daphne("b", APP, SETTINGS, **b)
    asyncio.run(_solo(stack, data, rounds, model))


MEASURES = {"admin": admin, "start": start, "solo": solo}

if __name__ == "__main__":
    what, *named = sys.argv[1:]
    stack = Stack()
    try:
        stack.manage("migrate", "--run-syncdb", "--noinput")
        MEASURES[what](stack, dict(item.split("=", 1) for item in named))
    finally:
        stack.close()
