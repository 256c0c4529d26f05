"""Figure 2: how many concurrent streaming runs one process holds with the upstream at 20 tokens/s,
while the p95 delay between two pieces a client receives stays under 250 ms and no run fails.

Levels rise until one misses; the last level that held is the capacity. Clients start over one
second (a crowd, not a single instant), each on its own socket and session.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tqdm import tqdm

from bench.clients import (
    RunResult,
    SSEClient,
    close_all,
    close_sockets,
    connect_all,
    open_sockets,
)
from bench.context import PROMPT, Bench, Scenario
from bench.report import Row
from bench.stats import p50, p95

Runner = Callable[[], Awaitable[RunResult]]
Closer = Callable[[], Awaitable[None]]
GAP_LIMIT = 0.250
RAMP = 1.0
DEFAULT_LEVELS = [50, 100, 200, 300, 400, 500, 600, 800, 1000]
QUICK_LEVELS = [50, 150]


@dataclass
class Level:
    clients: int
    failed: int
    first_error: str
    gap_p50: float
    gap_p95: float
    ttft_p95: float
    seconds: float

    @property
    def held(self) -> bool:
        return self.failed == 0 and self.gap_p95 < GAP_LIMIT


def scenario(bench: Bench) -> Scenario:
    return Scenario("capacity", 60 if bench.opts.quick else 100, 0.05)


def levels(bench: Bench) -> list[int]:
    return bench.opts.capacity_levels or (QUICK_LEVELS if bench.opts.quick else DEFAULT_LEVELS)


def sessions_needed(bench: Bench) -> int:
    return sum(levels(bench))


async def _clients(bench: Bench, target: str, n: int) -> tuple[list[Runner], Closer]:
    """n clients, each with its own socket (or stream) and session, ready to send."""
    sc = scenario(bench)
    limit = sc.timeout()
    if target == "naive":
        sockets = await open_sockets(n, bench.stack.url("naive"), "/ws/naive/", bench.cookie)
        frames = [
            {"action": "send", "input": PROMPT, "session_id": uuid.uuid4().hex, "model": sc.model}
            for _ in range(n)
        ]
    elif bench.opts.capacity_transport == "sse":
        sessions, agent = bench.take(n), bench.agent(sc)
        sses = [SSEClient(bench.stack.url("parley"), bench.token, limit) for _ in range(n)]
        await connect_all(sses)

        def over_sse(i: int) -> Runner:
            return lambda: sses[i].run(agent, sessions[i], PROMPT, sc.tokens, limit)

        return [over_sse(i) for i in range(n)], close_all(sses)
    else:
        sessions, agent = bench.take(n), bench.agent(sc)
        sockets = await open_sockets(
            n, bench.stack.url("parley"), "/ws/chat/", bench.cookie, sessions
        )
        frames = [
            {"action": "send", "input": PROMPT, "session_id": s, "agent_id": agent}
            for s in sessions
        ]

    def over_ws(i: int) -> Runner:
        return lambda: sockets[i].run(frames[i], sc.tokens, limit)

    async def close() -> None:
        await close_sockets(sockets)

    return [over_ws(i) for i in range(n)], close


async def hold(bench: Bench, target: str, n: int) -> Level:
    runners, close = await _clients(bench, target, n)

    async def one(i: int) -> RunResult:
        await asyncio.sleep(RAMP * i / n)
        return await runners[i]()

    started = time.perf_counter()
    try:
        results = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await close()
    failed = [r for r in results if not r.ok]
    gaps = [g for r in results if r.ok for g in r.gaps()]
    ttfts = [r.ttft for r in results if r.ok and r.ttft is not None]
    return Level(
        clients=n,
        failed=len(failed),
        first_error=failed[0].error[:160] if failed else "",
        gap_p50=p50(gaps),
        gap_p95=p95(gaps),
        ttft_p95=p95(ttfts),
        seconds=time.perf_counter() - started,
    )


async def ramp(bench: Bench, target: str, bar: tqdm) -> tuple[Level | None, Level | None]:
    """(the highest level held, the first level missed)."""
    best: Level | None = None
    for n in levels(bench):
        bar.set_postfix_str(f"{target} ×{n}")
        try:
            level = await hold(bench, target, n)
        except Exception as exc:  # e.g. the server refused sockets: this level did not hold
            level = Level(n, n, repr(exc)[:160], float("nan"), float("nan"), float("nan"), 0.0)
        bar.update()
        if not level.held:
            return best, level
        best = level
        await asyncio.sleep(1.0)  # let the last runs' finishing writes settle
    return best, None


def _describe(level: Level | None) -> str:
    if level is None:
        return "none"
    why = (
        f"{level.failed} failed ({level.first_error})"
        if level.failed
        else f"p95 gap {level.gap_p95 * 1000:.0f} ms"
    )
    return f"{level.clients} clients: {why}"


async def run(bench: Bench) -> None:
    bar = tqdm(total=2 * len(levels(bench)), desc="fig 2 capacity", unit="level")
    try:
        parley_best, parley_miss = await ramp(bench, "parley", bar)
        naive_best, naive_miss = await ramp(bench, "naive", bar)
    finally:
        bar.close()
    held = parley_best.clients if parley_best else 0
    naive_held = naive_best.clients if naive_best else 0
    top = levels(bench)[-1]
    transport = "SSE" if bench.opts.capacity_transport == "sse" else "WS"
    bench.add(
        Row(
            "2",
            f"concurrent streams held ({transport}, 20 tok/s)",
            "runs",
            (float(held), None),
            "Naive WS",
            (float(naive_held), None),
            target="≥ 300",
            passed=held >= 300,
            lower_is_better=False,
        )
    )
    if parley_best and naive_best:
        bench.add(
            Row(
                "2",
                "inter-chunk delay at the level held",
                "ms",
                (parley_best.gap_p50, parley_best.gap_p95),
                "Naive WS",
                (naive_best.gap_p50, naive_best.gap_p95),
                target=f"p95 < {GAP_LIMIT * 1000:.0f} ms",
            )
        )
        bench.add(
            Row(
                "2",
                "TTFT p95 at the level held",
                "ms",
                (parley_best.ttft_p95, None),
                "Naive WS",
                (naive_best.ttft_p95, None),
            )
        )
    bench.note(
        f"fig 2: levels tried {levels(bench)}; Parley first miss: {_describe(parley_miss)}"
        + (f" (all held up to {top})" if parley_miss is None else "")
        + f"; Naive first miss: {_describe(naive_miss)}."
    )
