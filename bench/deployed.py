"""Figure 1d: fig 1's steps with Parley in its deployed shape, `manage.py serve --workers N`:
nginx in front of one daphne process per core, on PostgreSQL and Redis, against Direct and
against Parley as one process (fig 1's, on `--db`'s database), measured in the same rounds by
the same clients. What the shape costs is its CPU per run over one process's, and its first
token at many fast clients against one process's.

The paced rounds at one client are left out: the fast ones already give what the hop through
nginx adds at one client, and they would take two minutes more. So is Naive, which fig 1 sets
beside one process.
"""

from __future__ import annotations

import os
import statistics

from tqdm import tqdm

from bench import latency
from bench.context import Bench, Fixtures
from bench.report import Row

SERVER = "deployed"
TRANSPORTS = ("direct", "sse", "ws", "sse_d", "ws_d")
ONE_PROCESS = {"sse_d": "sse", "ws_d": "ws"}
CPU_WITHIN = 1.3  # deployed CPU per run, at most this many times one process's
# Rounds at many fast clients: two, as fig 1 has, left the CPU ratio ±0.15 from one run to the
# next; six (twenty seconds more) narrow it.
FAST_MANY_ROUNDS = 6


def workers(bench: Bench) -> int:
    """One daphne process per core, as an operator would start them, unless told otherwise."""
    return bench.opts.workers or os.cpu_count() or 1


def plan(bench: Bench) -> list[latency.Step]:
    """Fig 1's steps in fig 1's order, with its warm-ups, but the paced one at one client (see
    above) and more rounds at many fast clients."""
    steps = []
    for step in latency.plan(bench):
        if step.clients == 1 and step.scenario.delay:
            continue
        warmup = tuple(t for t in TRANSPORTS if latency.kind(t) in step.warmup)
        step = step._replace(warmup=warmup)
        if step.clients > 1 and not step.scenario.delay and not bench.opts.quick:
            step = step._replace(rounds=FAST_MANY_ROUNDS)
        steps.append(step)
    return steps


def sessions_needed(bench: Bench) -> int:
    return sum(2 * step.clients for step in plan(bench))


def start(bench: Bench, models: list[str]) -> None:
    """The deployed shape's database made, migrated and seeded, then serve started on it."""
    stack = bench.stack
    env = stack.prepare_deployed()
    stack.manage("migrate", "--run-syncdb", "--noinput", **env)
    sessions = str(sessions_needed(bench))
    data = stack.helper("fixtures", "--sessions", sessions, "--models", *models, **env)
    bench.deployed = Fixtures(data["token"], data["cookie"], data["agents"], data["sessions"])
    stack.start_serve(SERVER, workers(bench), **env)


def _against_one_process(
    bench: Bench, where: str, series: dict[str, latency.Series], first_token: bool
) -> None:
    """Each deployed transport beside the same on one process: CPU per run, and with
    `first_token` (many fast clients) the median of each batch's first-token p95."""
    for mine, one in ONE_PROCESS.items():
        ours, theirs = series[mine], series[one]
        if not ours.results or not theirs.results:
            continue
        label, ref = latency.LABELS[mine], f"{latency.LABELS[one]} one process"
        cpu, ref_cpu = ours.cpu_per_run(), theirs.cpu_per_run()
        bench.add(
            Row("1d", f"server CPU per run {label} · {where}", "ms", (cpu, None), ref,
                (ref_cpu, None), target=f"≤ {CPU_WITHIN:.1f} × one process",
                passed=cpu <= CPU_WITHIN * ref_cpu)
        )  # fmt: skip
        if first_token and ours.ttft() and theirs.ttft():
            a, r = ours.ttft_p95_by_batch(), theirs.ttft_p95_by_batch()
            bench.add(
                Row("1d", f"TTFT {label} · median of batch p95 · {where}", "ms",
                    latency.pair(a), ref, latency.pair(r), target="≤ 1.00 × one process",
                    passed=statistics.median(a) <= statistics.median(r))
            )  # fmt: skip


async def run(bench: Bench) -> None:
    steps, n = plan(bench), workers(bench)
    bench.note(
        f"fig 1d: Parley deployed as `manage.py serve --workers {n}`, nginx in front of {n} "
        f"daphne processes{'' if bench.opts.workers else ' (one per core)'}, on PostgreSQL and "
        "Redis; Direct, one process and the clients as in fig 1, in the same rounds"
    )
    bar = tqdm(total=sum(step.rounds for step in steps), desc="fig 1d deployed", unit="round")
    try:
        for step in steps:
            scenario, clients = step.scenario, step.clients
            bar.set_postfix_str(f"{scenario.name} ×{clients}")
            series = await latency.measure(
                bench, TRANSPORTS, scenario, clients, step.rounds, step.warmup, bar
            )
            where = latency.where(scenario, clients, f"{n} workers")
            # The product's goal for the deployed shape is at many streams only.
            latency.rows(bench, "1d", where, series, clients == 1, solo_target=False)
            _against_one_process(bench, where, series, clients > 1 and not scenario.delay)
    finally:
        bar.close()
        # Its processes leave the machine to the figures after it.
        bench.stack.stop(SERVER)
