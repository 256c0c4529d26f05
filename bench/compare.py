"""Parley against itself with other settings (`--against NAME=VALUE ...`): fig 1's rounds at many
clients, on a second daphne process of the same code and database started with those settings
(B), taking turns round by round with the one configured as usual (A). With `--against-ref REV`,
B runs the code of commit REV instead, from a git worktree and a database of its own.

A shared machine runs the same code at different speeds from one minute to the next, so two
separate runs of the benchmark cannot tell a small change apart; in one run, with the two
servers' batches side by side in every round, the outside load falls on both alike.
"""

from __future__ import annotations

import dataclasses
import statistics

from tqdm import tqdm

from bench import latency
from bench.context import Bench
from bench.report import Row

TRANSPORTS = ("direct", "sse", "sse_b", "ws", "ws_b")
PAIRS = (("sse", "sse_b"), ("ws", "ws_b"))


def plan(bench: Bench) -> list[latency.Step]:
    """Many short fast rounds and a few paced ones: every batch is one sample of each."""
    quick = bench.opts.quick
    fast, paced, n = latency.scenarios(bench)
    return [
        latency.Step(fast, n, 2 if quick else 12, TRANSPORTS, 0),
        latency.Step(paced, n, 1 if quick else 4, (), 0),
    ]


def sessions_needed(bench: Bench) -> int:
    return sum((len(TRANSPORTS) - 1) * step.clients for step in plan(bench))


# Each row: what is measured, its unit, and its values in one series (tok/s: more is better).
MEASURES = (
    ("TTFT {} · median of batch p95", "ms", lambda s: [statistics.median(s.ttft_p95_by_batch())]),
    ("TTFT {}", "ms", lambda s: s.ttft()),
    ("throughput {}", "tok/s", lambda s: s.throughputs),
    ("server CPU per run {}", "ms", lambda s: [s.cpu_per_run()]),
)


def b_label(bench: Bench) -> str:
    """B's commit, if another, and its settings."""
    ref = bench.stack.ref
    named = [ref.commit] if ref else []
    return "B: " + " ".join(named + [f"{k}={v}" for k, v in bench.opts.against.items()])


def _rows(bench: Bench, where: str, series: dict[str, latency.Series]) -> None:
    against = b_label(bench)
    for mine, theirs in PAIRS:
        label = f"{latency.LABELS[mine]} · {where}"
        for measure, unit, values in MEASURES:
            a, b = latency.pair(values(series[mine])), latency.pair(values(series[theirs]))
            row = Row("A/B", measure.format(label), unit, a, against, b)
            bench.add(dataclasses.replace(row, lower_is_better=unit != "tok/s"))
    bench.note(f"A/B, {where}: first-token p95 of each batch, ms: {latency.batches(series)}")
    latency.note_failures(bench, f"A/B, {{}} · {where}", series)


async def run(bench: Bench) -> None:
    steps = plan(bench)
    bar = tqdm(total=sum(step.rounds for step in steps), desc="A/B", unit="round")
    ref = bench.stack.ref
    b = (
        f"a second Parley of commit {ref.commit} (its own worktree and database)"
        if ref
        else "a second Parley of the same code and database"
    )
    if bench.opts.against:
        b += " with the settings named"
    bench.note(
        f"A/B: the Parley column is A, Parley as configured; the reference is B, {b}; ratio A / B"
    )
    try:
        for step in steps:
            bar.set_postfix_str(f"{step.scenario.name} ×{step.clients}")
            series = await latency.measure(
                bench, TRANSPORTS, step.scenario, step.clients, step.rounds, step.warmup, bar
            )
            _rows(bench, f"{step.clients} clients · {step.scenario.name}", series)
    finally:
        bar.close()
