"""Figure 1: time to first token and total time of a run, over SSE and over the WebSocket,
at one client and at many, against the upstream read directly (Direct) and the naive consumer.

Every transport runs the same scenario with the same client machinery in this one process; the
four are measured one after another, never at the same time, so they don't share the CPU.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from tqdm import tqdm

from bench.clients import (
    NGINX_IDLE_TIMEOUT,
    SERVER_IDLE_TIMEOUT,
    ChatSocket,
    DirectClient,
    OpenAIClient,
    RunResult,
    SSEClient,
    close_all,
    close_sockets,
    connect_all,
    open_sockets,
)
from bench.context import PROMPT, Bench, Scenario
from bench.procs import Snapshot, cpu_seconds, machine_cpu_seconds, snapshot, used
from bench.report import Row
from bench.stats import p50, p95

TRANSPORTS = ("direct", "sse", "ws", "naive")
REFERENCES = ("direct", "naive")
# sse_b and ws_b: the same transports on a second Parley with other settings (bench/compare.py),
# v1_b on one of another commit (bench/openai_door.py);
# sse_d and ws_d: on Parley in its deployed shape, behind nginx (bench/deployed.py).
LABELS = {
    "direct": "Direct",
    "sse": "SSE",
    "ws": "WS",
    "naive": "Naive WS",
    "v1": "/v1 (OpenAI)",
    "v1_b": "/v1 (OpenAI) (B)",
    "sse_b": "SSE (B)",
    "ws_b": "WS (B)",
    "sse_d": "SSE deployed",
    "ws_d": "WS deployed",
}


@dataclass
class Series:
    """Every run of one transport in one scenario at one concurrency."""

    results: list[RunResult] = field(default_factory=list)
    throughputs: list[float] = field(default_factory=list)  # tokens/s of each concurrent batch
    # CPU seconds used during the recorded rounds by the processes doing this transport's work
    # (the server's; for Direct this process's, which reads the upstream itself), by the
    # upstream, and by this process's clients (for Direct, the reader again).
    cpu: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)  # the server's, by the part each plays
    # Each batch's CPU seconds in the one server process that used the most: no batch can take
    # less time than that, as a process runs on one core at a time.
    busiest: float = 0.0
    upstream_cpu: float = 0.0
    client_cpu: float = 0.0
    machine_cpu: float = 0.0  # by every process on the machine, anyone else's too
    wall: float = 0.0  # seconds the recorded batches took, end to end
    sizes: list[int] = field(default_factory=list)  # runs in each recorded batch, in order

    @property
    def ok(self) -> list[RunResult]:
        return [r for r in self.results if r.ok]

    @property
    def failures(self) -> list[RunResult]:
        return [r for r in self.results if not r.ok]

    def ttft(self) -> list[float]:
        return [r.ttft for r in self.ok if r.ttft is not None]

    def total(self) -> list[float]:
        return [r.total for r in self.ok if r.total is not None]

    def ttft_p95_by_batch(self) -> list[float]:
        """Each recorded batch's own first-token p95. A batch's first tokens come out close
        together, so a pooled p95 is much the worse batch's."""
        found, at = [], 0
        for size in self.sizes:
            batch = Series(results=self.results[at : at + size])
            found.append(p95(batch.ttft()))
            at += size
        return found

    def add_cpu(self, before: Snapshot, after: Snapshot) -> None:
        """The server's CPU in one batch, between two snapshots of its processes."""
        spent = used(before, after)
        for part, seconds in spent.values():
            self.parts[part] = self.parts.get(part, 0.0) + seconds
        self.cpu += sum(seconds for _, seconds in spent.values())
        self.busiest += max((seconds for _, seconds in spent.values()), default=0.0)

    def cpu_per_run(self) -> float:
        return self.cpu / len(self.results) if self.results else float("nan")

    def busy(self) -> tuple[float, float, float]:
        """The share of one core that the transport's process, the upstream and the clients
        used while the recorded batches ran: near 1, that process was the limit; near 2
        together, the machine's two cores were."""
        if not self.wall:
            return (float("nan"), float("nan"), float("nan"))
        return (self.cpu / self.wall, self.upstream_cpu / self.wall, self.client_cpu / self.wall)


Runner = Callable[[int], Awaitable[RunResult]]
SERVER = {
    "sse": "parley",
    "ws": "parley",
    "v1": "parley",
    "naive": "naive",
    "sse_b": "parley_b",
    "ws_b": "parley_b",
    "v1_b": "parley_b",
    "sse_d": "deployed",
    "ws_d": "deployed",
}


def kind(transport: str) -> str:
    """What a transport is, whichever server it runs on: direct, sse, ws or naive."""
    return transport.partition("_")[0]


async def _runners(
    bench: Bench, transport: str, scenario: Scenario, n: int
) -> tuple[list[Runner], Callable[[], Awaitable[None]]]:
    """n independent clients of one transport, and how to let them go."""
    stack, timeout, tokens = bench.stack, scenario.timeout(), scenario.tokens
    server, what = SERVER.get(transport, ""), kind(transport)
    fixtures = bench.fixtures(server)
    if what == "direct":
        directs = [DirectClient(stack.upstream_url, timeout) for _ in range(n)]
        await connect_all(directs)

        async def run_direct(i: int) -> RunResult:
            return await directs[i].run(scenario.model, PROMPT, tokens, timeout)

        return [run_direct] * n, close_all(directs)
    if what in ("sse", "v1"):
        idle = NGINX_IDLE_TIMEOUT if server in stack.serves else SERVER_IDLE_TIMEOUT
        url, token = stack.url(server), fixtures.token
        client = OpenAIClient if what == "v1" else SSEClient
        sses = [client(url, token, timeout, idle) for _ in range(n)]
        await connect_all(sses)
        agent = fixtures.agent(scenario)
        # /v1 names sessions of its own (made by the warm-up batch): the fixtures' belong to
        # another agent, which a named /v1 session may not change.
        fresh = [f"bench-v1-{uuid.uuid4().hex}" for _ in range(n)]
        sessions = fresh if what == "v1" else fixtures.take(n)

        async def run_sse(i: int) -> RunResult:
            return await sses[i].run(agent, sessions[i], PROMPT, tokens, timeout)

        return [run_sse] * n, close_all(sses)
    sockets: list[ChatSocket]
    watched: list[str] | None = None
    if what == "ws":
        url, path = stack.url(server), "/ws/chat/"
        sessions, agent = fixtures.take(n), fixtures.agent(scenario)
        watched = sessions
        frames = [
            {"action": "send", "input": PROMPT, "session_id": s, "agent_id": agent}
            for s in sessions
        ]
    else:
        url, path = stack.url("naive"), "/ws/naive/"
        frames = [
            {"action": "send", "input": PROMPT, "session_id": uuid.uuid4().hex, "model": model}
            for model in [scenario.model] * n
        ]
    sockets = await open_sockets(n, url, path, fixtures.cookie, watched)
    failed = [False] * n

    def runner(i: int) -> Runner:
        async def run_ws(_: int) -> RunResult:
            if failed[i]:
                # A run that failed may have left frames unread: they must not count as the
                # next run's. Its socket is replaced, as a browser tab would reconnect.
                await sockets[i].close()
                cookie = fixtures.cookie
                fresh = await open_sockets(1, url, path, cookie, watched and [watched[i]])
                sockets[i] = fresh[0]
            result = await sockets[i].run(frames[i], tokens, timeout)
            failed[i] = not result.ok
            return result

        return run_ws

    async def close() -> None:
        await close_sockets(sockets)

    return [runner(i) for i in range(n)], close


def round_order(transports: tuple[str, ...], r: int) -> list[str]:
    """The references first, then Parley's transports, each pair in turn reversed every other
    round. Whichever of SSE and WS goes first finds Parley idle since its previous round (long,
    in the paced scenario, and code run after an idle spell runs slower for its first moments);
    the other finds it just used. Alternating gives each that place in half the rounds, where a
    rotation would always put SSE after Direct."""
    ours = [t for t in transports if t not in REFERENCES]
    refs = [t for t in transports if t in REFERENCES]
    if r % 2:
        refs.reverse()
        ours.reverse()
    return refs + ours


def _cpu(bench: Bench, transport: str) -> tuple[Snapshot, float]:
    """CPU seconds used so far by the processes doing a transport's work (Direct's: this one,
    its reader), and by the upstream."""
    server = SERVER.get(transport)
    if server:
        mine = snapshot(bench.stack.processes(server))
    else:
        mine = {os.getpid(): ("reader", time.process_time())}
    return mine, cpu_seconds(bench.stack.pid("upstream"))


async def _batch(runners: list[Runner]) -> tuple[list[RunResult], float]:
    started = time.perf_counter()
    batch = await asyncio.gather(*(run(i) for i, run in enumerate(runners)))
    return list(batch), time.perf_counter() - started


async def measure(
    bench: Bench,
    transports: tuple[str, ...],
    scenario: Scenario,
    clients: int,
    rounds: int,
    warmup: tuple[str, ...],
    bar: tqdm | None = None,
    fewer: dict[str, int] | None = None,
) -> dict[str, Series]:
    """`rounds` rounds; in each, every transport in turn runs one batch (`clients` runs at
    once). Interleaving the transports round by round spreads any outside load over all of
    them alike, instead of on whichever happened to run at that moment (see `round_order`).
    `warmup`: the transports that run one unrecorded batch first. `fewer`: transports that
    run only in the first so many rounds."""
    fewer = fewer or {}
    series = {t: Series() for t in transports}
    runners: dict[str, list[Runner]] = {}
    closers: list[Callable[[], Awaitable[None]]] = []
    try:
        for transport in transports:
            runners[transport], close = await _runners(bench, transport, scenario, clients)
            closers.append(close)
        for transport in warmup:  # connection pools, first-use code paths; not recorded
            await _batch(runners[transport])
        for r in range(rounds):
            for transport in round_order(transports, r):
                if r >= fewer.get(transport, rounds):
                    continue
                cpu_before, upstream_before = _cpu(bench, transport)
                client_before, machine_before = time.process_time(), machine_cpu_seconds()
                batch, wall = await _batch(runners[transport])
                client_after, machine_after = time.process_time(), machine_cpu_seconds()
                cpu_after, upstream_after = _cpu(bench, transport)
                series[transport].add_cpu(cpu_before, cpu_after)
                series[transport].upstream_cpu += upstream_after - upstream_before
                series[transport].client_cpu += client_after - client_before
                series[transport].machine_cpu += machine_after - machine_before
                series[transport].wall += wall
                series[transport].results += batch
                series[transport].sizes.append(len(batch))
                delivered = sum(1 for res in batch if res.ok) * scenario.tokens
                series[transport].throughputs.append(delivered / wall)
            if bar is not None:
                bar.update()
    finally:
        for close in closers:
            await close()
    return series


def pair(values: list[float]) -> tuple[float, float | None]:
    if len(values) == 1:
        return (values[0], None)
    return (p50(values), p95(values))


def _refs(mine: str, series: dict[str, Series]) -> list[str]:
    """What a transport's rows are set beside: Direct, and for a WebSocket the naive consumer,
    when it ran in the same rounds."""
    return [r for r in REFERENCES if r in series and (r == "direct" or kind(mine) == "ws")]


def _latency_rows(
    bench: Bench,
    figure: str,
    where: str,
    solo: bool,
    mine: str,
    series: dict[str, Series],
    limit: float | None,
) -> None:
    """`limit`: the most first-token overhead the target allows, if there is one (at one
    client, on p50; at many, on p95)."""
    for measure in ("TTFT", "total"):
        for ref_name in _refs(mine, series):
            ours, theirs = series[mine], series[ref_name]
            values = ours.ttft() if measure == "TTFT" else ours.total()
            ref_values = theirs.ttft() if measure == "TTFT" else theirs.total()
            row = Row(
                figure,
                f"{measure} {LABELS[mine]} · {where}",
                "ms",
                pair(values),
                LABELS[ref_name],
                pair(ref_values),
            )
            if ref_name == "direct" and values and ref_values:
                # The overhead Parley adds: the same percentile, Parley's minus Direct's.
                q = 50 if solo else 95
                delta = p50(values) - p50(ref_values) if solo else p95(values) - p95(ref_values)
                row.target = f"Δp{q} {delta * 1000:+.1f} ms"
                if measure == "TTFT" and limit is not None:
                    row.target += f" ≤ {limit * 1000:.0f} ms"
                    row.passed = delta <= limit and not ours.failures
            bench.add(row)


def _load_rows(bench: Bench, figure: str, where: str, mine: str, series: dict[str, Series]) -> None:
    ours = series[mine]
    for ref_name in _refs(mine, series):
        row = Row(
            figure,
            f"throughput {LABELS[mine]} · {where}",
            "tok/s",
            pair(ours.throughputs),
            LABELS[ref_name],
            pair(series[ref_name].throughputs),
            lower_is_better=False,
        )
        if ref_name == "direct":
            row.target = "≥ 0.90 × Direct"
            row.passed = (row.ratio or 0) >= 0.9 and not ours.failures
        bench.add(row)


# The product's targets for the first-token overhead: Δp50 at one client, Δp95 at many.
SOLO_LIMIT = 0.010
MANY_LIMIT = 0.150


def rows(
    bench: Bench,
    figure: str,
    where: str,
    series: dict[str, Series],
    solo: bool,
    solo_target: bool = True,
) -> None:
    """The rows and notes of one step of fig 1's rounds, named `figure` in the table.
    `solo_target`: whether a one-client step's first token has a target."""
    ours = [t for t in series if t not in REFERENCES]
    limit = (SOLO_LIMIT if solo_target else None) if solo else MANY_LIMIT
    for mine in ours:
        _latency_rows(bench, figure, where, solo, mine, series, limit)
        if not solo:
            _load_rows(bench, figure, where, mine, series)
    # Server CPU per run does not depend on what else the machine is doing. Against Direct's
    # reader: where both are bound by one core (many fast streams), throughput goes by it.
    for mine in ours:
        for ref_name in (r for r in REFERENCES if r in series):
            bench.add(
                Row(
                    figure,
                    f"server CPU per run {LABELS[mine]} · {where}",
                    "ms",
                    (series[mine].cpu_per_run(), None),
                    "Direct reader" if ref_name == "direct" else LABELS[ref_name],
                    (series[ref_name].cpu_per_run(), None),
                )
            )
    if not solo:
        shares = "; ".join(_shares(t, s) for t, s in series.items())
        cores = os.cpu_count() or 1
        bench.note(
            f"fig {figure}, {where}: share of a core used while each ran (the machine's "
            f"{cores} cores make {cores * 100}%): {shares}"
        )
        bench.note(
            f"fig {figure}, {where}: first-token p95 of each recorded batch, ms: {batches(series)}"
        )
        bound = _cpu_bound(series)
        if bound:
            bench.note(f"fig {figure}, {where}: {bound}")
    note_failures(bench, f"fig {figure}, {{}} · {where}", series)


def _shares(transport: str, s: Series) -> str:
    own, upstream, clients = s.busy()
    # Everything busy on the machine meanwhile, and what of it was none of the benchmark's.
    ours = own + upstream + (0 if transport == "direct" else clients)
    machine = "machine n/a"
    if s.wall:
        busy = s.machine_cpu / s.wall
        machine = f"machine {busy:.0%} (others {max(busy - ours, 0):.0%})"
    if transport == "direct":  # its clients are its reader
        return f"{LABELS[transport]} {own:.0%} (its reader), upstream {upstream:.0%}, {machine}"
    server = "its server"
    if len(s.parts) > 1 and s.wall:  # a server of several processes: each part's share
        server = ", ".join(f"{part} {seconds / s.wall:.0%}" for part, seconds in s.parts.items())
    return (
        f"{LABELS[transport]} {own:.0%} ({server}), upstream {upstream:.0%}, "
        f"clients {clients:.0%}, {machine}"
    )


def batches(series: dict[str, Series]) -> str:
    """Each transport's first-token p95 of each recorded batch, in ms, in round order."""
    return "; ".join(
        f"{LABELS[t]} " + " / ".join(f"{v * 1000:.0f}" for v in s.ttft_p95_by_batch())
        for t, s in series.items()
    )


def note_failures(bench: Bench, where: str, series: dict[str, Series]) -> None:
    """A note for each transport that had failed runs; `where` has a {} for its label."""
    for transport, s in series.items():
        if s.failures:
            first = s.failures[0].error[:160]
            bench.note(
                f"{where.format(LABELS[transport])}: {len(s.failures)} of {len(s.results)} "
                f"runs failed (first: {first})"
            )


# A process using this much of a core while it ran was held back by that core.
SATURATED = 0.9


def _cpu_bound(series: dict[str, Series]) -> str:
    """Where Direct's reader used a whole core, the most throughput Parley could have had by
    CPU: each of its server's processes has one core at most, and its server, the upstream and
    the clients together have the machine's. Against Direct's measured time per run, whose
    reader reads every chunk as Parley's server does."""
    direct, cores = series["direct"], os.cpu_count() or 1
    if not direct.results or direct.busy()[0] < SATURATED:
        return ""  # Direct was held by the upstream's pace, not by CPU
    direct_per_run = direct.wall / len(direct.results)
    found = []
    for mine in (t for t in series if t not in REFERENCES):
        ours = series[mine]
        if not ours.results:
            continue
        busiest = ours.busiest / len(ours.results)
        everything = (ours.cpu + ours.upstream_cpu + ours.client_cpu) / len(ours.results)
        floor = max(busiest, everything / cores)
        measured = p50(ours.throughputs) / p50(direct.throughputs)
        found.append(
            f"{LABELS[mine]} {direct_per_run / floor:.2f} (measured {measured:.2f}; per run, "
            f"{busiest * 1000:.1f} ms of CPU in the server's busiest process, on one core, and "
            f"{everything * 1000:.1f} ms in the server, upstream and clients, on {cores})"
        )
    if not found:
        return ""
    return "CPU-bound: the most throughput Parley could reach, as a ratio to Direct: " + "; ".join(
        found
    )


class Step(NamedTuple):
    scenario: Scenario
    clients: int
    rounds: int
    warmup: tuple[str, ...]
    naive_rounds: int  # Naive runs in the first so many rounds only


def scenarios(bench: Bench) -> tuple[Scenario, Scenario, int]:
    """The fast and the paced upstream, and the many clients (fewer and shorter with --quick)."""
    quick = bench.opts.quick
    fast = Scenario("fast", 200, 0.0)
    paced = Scenario("paced", 60 if quick else 200, 0.05)
    return fast, paced, min(bench.opts.clients, 50) if quick else bench.opts.clients


def plan(bench: Bench) -> list[Step]:
    """The steps in the order they run. --quick is a smoke run: fewer, shorter, smaller.

    The fast ones first, each after an unrecorded batch of every transport but Naive
    (connection pools, first-use code paths). The paced rounds at many clients come straight
    after the fast ones, while the connections Parley opened to the model for those are still
    open: it keeps them a minute idle (LLM_KEEPALIVE), and Direct's clients open theirs before
    any round. After the paced rounds at one client they would have closed, and whichever of
    SSE and WS ran first would open a hundred anew in its recorded batch.

    Naive runs one batch at many clients, with no warm-up, and half the paced rounds at one
    client. It writes every token, so its batches are the run's slowest by far; a hundred runs
    measure a reference that far behind well enough, and its `openai` client keeps its
    connections five seconds, so no warm-up would carry over anyway.
    """
    quick = bench.opts.quick
    fast, paced, n = scenarios(bench)
    warm = tuple(t for t in TRANSPORTS if t != "naive")
    # An even number of rounds, so SSE and WS each go first in half of them (see round_order).
    return [
        Step(fast, 1, 4 if quick else 20, TRANSPORTS, 4 if quick else 20),
        Step(fast, n, 1 if quick else 2, () if quick else warm, 1),
        Step(paced, n, 1 if quick else 2, (), 1),
        Step(paced, 1, 1 if quick else 4, (), 1 if quick else 2),
    ]


def where(scenario: Scenario, clients: int, *shape: str) -> str:
    """How a step's rows name it: its clients, the server's shape if other than one process,
    and its scenario."""
    return " · ".join([f"{clients} client{'s' if clients > 1 else ''}", *shape, scenario.name])


def sessions_needed(bench: Bench) -> int:
    return sum(2 * step.clients for step in plan(bench))


async def run(bench: Bench) -> None:
    steps = plan(bench)
    bar = tqdm(total=sum(step.rounds for step in steps), desc="fig 1 latency", unit="round")
    try:
        for step in steps:
            scenario, clients = step.scenario, step.clients
            bar.set_postfix_str(f"{scenario.name} ×{clients}")
            fewer = {"naive": step.naive_rounds}
            series = await measure(
                bench, TRANSPORTS, scenario, clients, step.rounds, step.warmup, bar, fewer
            )
            rows(bench, "1", where(scenario, clients), series, clients == 1)
            bench.shared[("latency", scenario.name, clients)] = series
    finally:
        bar.close()
