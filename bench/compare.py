"""Parley against itself with other settings (`--against NAME=VALUE ...`): fig 1's rounds at many
clients, on a second daphne process of the same code and database started with those settings
(B), taking turns round by round with the one configured as usual (A).

This machine runs the same code up to half again slower from one minute to the next, so two
separate runs of the benchmark cannot tell a change of 10% apart; in one run, with the two
servers' batches side by side in every round, the outside load falls on both alike.
"""

from __future__ import annotations

import statistics

from tqdm import tqdm

from bench import latency
from bench.context import Bench, Scenario
from bench.report import Row

TRANSPORTS = ("direct", "sse", "sse_b", "ws", "ws_b")
PAIRS = (("sse", "sse_b"), ("ws", "ws_b"))


def plan(bench: Bench) -> list[latency.Step]:
    """Many short fast rounds and a few paced ones: every batch is one sample of each."""
    quick = bench.opts.quick
    fast = Scenario("fast", 200, 0.0)
    paced = Scenario("paced", 60 if quick else 200, 0.05)
    n = min(bench.opts.clients, 50) if quick else bench.opts.clients
    return [
        latency.Step(fast, n, 2 if quick else 12, TRANSPORTS, 0),
        latency.Step(paced, n, 1 if quick else 4, (), 0),
    ]


def sessions_needed(bench: Bench) -> int:
    return sum((len(TRANSPORTS) - 1) * step.clients for step in plan(bench))


def _rows(bench: Bench, where: str, series: dict[str, latency.Series]) -> None:
    against = "B: " + " ".join(f"{k}={v}" for k, v in bench.opts.against.items())
    for mine, theirs in PAIRS:
        a, b = series[mine], series[theirs]
        label = latency.LABELS[mine]
        batch_a, batch_b = a.ttft_p95_by_batch(), b.ttft_p95_by_batch()
        rows = [
            Row(
                "A/B",
                f"TTFT {label} · {where} · median of batch p95",
                "ms",
                (statistics.median(batch_a), None),
                against,
                (statistics.median(batch_b), None),
            ),
            Row(
                "A/B",
                f"TTFT {label} · {where}",
                "ms",
                latency.pair(a.ttft()),
                against,
                latency.pair(b.ttft()),
            ),
            Row(
                "A/B",
                f"throughput {label} · {where}",
                "tok/s",
                latency.pair(a.throughputs),
                against,
                latency.pair(b.throughputs),
                lower_is_better=False,
            ),
            Row(
                "A/B",
                f"server CPU per run {label} · {where}",
                "ms",
                (a.cpu_per_run(), None),
                against,
                (b.cpu_per_run(), None),
            ),
        ]
        for row in rows:
            bench.add(row)
    bench.note(
        f"A/B, {where}: the Parley column is A, Parley as configured; the reference is B, a second "
        "Parley of the same code and database with the settings named; ratio A / B"
    )
    batches = "; ".join(
        f"{name} " + " / ".join(f"{v * 1000:.0f}" for v in s.ttft_p95_by_batch())
        for name, s in series.items()
    )
    bench.note(f"A/B, {where}: first-token p95 of each batch, ms, in round order: {batches}")
    for name, s in series.items():
        if s.failures:
            bench.note(f"A/B, {name} · {where}: {len(s.failures)} of {len(s.results)} runs failed")


async def run(bench: Bench) -> None:
    steps = plan(bench)
    bar = tqdm(total=sum(step.rounds for step in steps), desc="A/B", unit="round")
    try:
        for step in steps:
            bar.set_postfix_str(f"{step.scenario.name} ×{step.clients}")
            series = await latency.measure(
                bench, TRANSPORTS, step.scenario, step.clients, step.rounds, step.warmup, bar
            )
            _rows(bench, f"{step.clients} clients · {step.scenario.name}", series)
    finally:
        bar.close()
