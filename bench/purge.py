"""Figure 11: chat while `manage.py purge_expired` deletes a backlog of a million messages past
their retention period. Many fast clients over SSE and the WebSocket, as in fig 1, in rounds
before the purge starts, while it runs and after it ends; the first token's p95 while it runs
against without it (the rounds before and after, the same clients), in the same run.

The purge runs as the docs' cron line runs it (`nice -n 10`), in a process of its own, with its
default batches and pauses; it deletes sessions of other people than the load's. It is stopped
after MOST_DURING rounds beside it, if not done by then: a million messages take it minutes.
"""

from __future__ import annotations

import statistics
import subprocess
import time

from tqdm import tqdm

from bench import latency
from bench.context import Bench, Scenario
from bench.report import Row
from bench.servers import PYTHON, ROOT

TRANSPORTS = ("sse", "ws")
MESSAGES, QUICK_MESSAGES = 1_000_000, 100_000
AROUND = 5  # rounds without the purge, before and after it (1 with --quick)
MOST_DURING = 20  # rounds while it runs, at most
WITHIN = 1.10  # the first token's p95 while purging, at most this many times without


def scenario(bench: Bench) -> Scenario:
    """Fig 1's fast upstream, whose agent the fixtures made."""
    fast, _, _ = latency.scenarios(bench)
    return fast


def _around(bench: Bench) -> int:
    return 1 if bench.opts.quick else AROUND


def sessions_needed(bench: Bench) -> int:
    rounds = 2 * _around(bench) + MOST_DURING + 1  # and the warm-up batch
    return len(TRANSPORTS) * bench.opts.clients * rounds


def _start_purge(bench: Bench) -> subprocess.Popen[bytes]:
    log = open(bench.stack.tmp / "purge.log", "wb")
    env = bench.stack.env("project.settings", PARLEY_RETENTION_DAYS="30")
    command = ["nice", "-n", "10", PYTHON, "manage.py", "purge_expired"]  # as cron would
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    log.close()
    return proc


async def _round(bench: Bench, clients: int, warm: bool) -> dict[str, latency.Series]:
    warmup = TRANSPORTS if warm else ()
    return await latency.measure(bench, TRANSPORTS, scenario(bench), clients, 1, warmup)


async def run(bench: Bench) -> None:
    clients, messages = bench.opts.clients, QUICK_MESSAGES if bench.opts.quick else MESSAGES
    seeded = bench.stack.helper("seed-expired", "--messages", str(messages))
    before: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    during: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    after: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    bar = tqdm(desc="fig 11 purge", unit="round")
    try:
        # Unrecorded: the first round after the seeding ran 5 to 8 times slower than the
        # rest in every run (before any purge), warm-up batch or not.
        await _round(bench, clients, warm=True)
        for _ in range(_around(bench)):
            _keep(before, await _round(bench, clients, warm=False))
            bar.update()
        purge, started = _start_purge(bench), time.monotonic()
        while purge.poll() is None and len(during["sse"]) < MOST_DURING:
            _keep(during, await _round(bench, clients, warm=False))
            bar.update()
        finished = purge.poll() is not None
        if not finished:
            purge.terminate()  # the batch under way rolls back
        purge.wait()
        took = time.monotonic() - started
        for _ in range(_around(bench)):
            _keep(after, await _round(bench, clients, warm=False))
            bar.update()
    finally:
        bar.close()
    gone = seeded["messages"] - bench.stack.helper("count-expired")["messages"]
    bench.note(
        f"fig 11: purge_expired deleted {gone:,} of {seeded['messages']:,} messages "
        f"({seeded['sessions']:,} sessions, seeded in {seeded['seconds']} s) in {took:.0f} s, "
        f"{gone / took:,.0f} a second, while {len(during['sse'])} rounds ran"
        f"{'' if finished else '; stopped then'}"
    )
    for transport in TRANSPORTS:
        rounds = "; ".join(
            f"{name} {', '.join(f'{p * 1000:.0f}' for p in found[transport])}"
            for name, found in (("before", before), ("during", during), ("after", after))
        )
        bench.note(
            f"fig 11, {latency.LABELS[transport]}: each round's first-token p95, ms: {rounds}"
        )
    without = {t: before[t] + after[t] for t in TRANSPORTS}
    where = f"{clients} clients · fast · during a purge of {seeded['messages']:,} messages"
    if not during["sse"]:
        bench.note("fig 11: the purge ended before a round ran beside it: nothing to compare")
    for transport in TRANSPORTS:
        # No round beside the purge: a miss, shown as n/a, not a row left out.
        mine, ref = during[transport] or [float("nan")], without[transport]
        label = latency.LABELS[transport]
        bench.add(
            Row("11", f"TTFT {label} · median of batch p95 · {where}", "ms",
                latency.pair(mine), f"{label} without purge", latency.pair(ref),
                target=f"≤ {WITHIN:.2f} × without",
                passed=statistics.median(mine) <= WITHIN * statistics.median(ref))
        )  # fmt: skip


def _keep(found: dict[str, list[float]], series: dict[str, latency.Series]) -> None:
    """Each transport's first-token p95 of the round's batch."""
    for transport, one in series.items():
        found[transport] += one.ttft_p95_by_batch()
