"""Figure 10: the OpenAI-compatible door. The same streamed runs through `POST
/v1/chat/completions` (the session named by its header, OpenAI's chunks) and through `POST
/api/runs` with SSE, on the same server, batch by batch in turn: first token and throughput,
at one client and at many, against the fast upstream. With `--against-ref REV`, the same two
on a second Parley of that commit's code (B) take their turns in the same rounds, so that both
commits' door is set beside its own REST API under the same outside load."""

from __future__ import annotations

import statistics

from tqdm import tqdm

from bench import latency
from bench.context import Bench
from bench.report import Row

TRANSPORTS = ("sse", "v1")
ON_B = ("sse_b", "v1_b")
WITHIN = 0.10  # the door may cost this much of the REST API's first token and throughput


def plan(bench: Bench) -> list[tuple[int, int]]:
    """(clients, rounds): an even number of rounds, so each goes first in half of them."""
    quick = bench.opts.quick
    _, _, many = latency.scenarios(bench)
    return [(1, 4 if quick else 20), (many, 2 if quick else 16)]


def sessions_needed(bench: Bench) -> int:
    return sum(clients for clients, _ in plan(bench))  # SSE's; /v1 makes its own


def transports(bench: Bench) -> tuple[str, ...]:
    return TRANSPORTS + (ON_B if bench.stack.ref else ())


def _first_token(clients: int, where: str, s: latency.Series) -> tuple[str, list[float]]:
    """At one client, every run's; at many, each batch's p95."""
    if clients == 1:
        return f"TTFT · {where}", s.ttft()
    return f"TTFT · median of batch p95 · {where}", s.ttft_p95_by_batch()


def _rows(bench: Bench, clients: int, series: dict[str, latency.Series], b: str = "") -> None:
    """The door against the REST API on one server: A's (b ""), or B's (b "_b")."""
    mine, ref = series["v1" + b], series["sse" + b]
    if not mine.ttft() or not ref.ttft():
        return  # nothing to compare: the notes say why
    where = latency.where(latency.scenarios(bench)[0], clients)
    side = f" (B: {bench.stack.ref.commit})" if b and bench.stack.ref else ""
    label, a, r = *_first_token(clients, where, mine), _first_token(clients, where, ref)[1]
    bench.add(
        Row("10", f"/v1{side} {label}", "ms", latency.pair(a), reference=f"/api/runs SSE{side}",
            ref=latency.pair(r), target=f"≤ {1 + WITHIN:.2f} × SSE",
            passed=statistics.median(a) <= (1 + WITHIN) * statistics.median(r))
    )  # fmt: skip
    a, r = mine.throughputs, ref.throughputs
    bench.add(
        Row("10", f"/v1{side} throughput · {where}", "tok/s", latency.pair(a),
            reference=f"/api/runs SSE{side}", ref=latency.pair(r),
            target=f"≥ {1 - WITHIN:.2f} × SSE",
            passed=statistics.median(a) >= (1 - WITHIN) * statistics.median(r),
            lower_is_better=False)
    )  # fmt: skip


def _cpu(series: dict[str, latency.Series]) -> str:
    """What a run cost the server and this process's client, which reads the answers: unlike
    latencies, it hardly depends on outside load."""
    return "; ".join(
        f"{latency.LABELS[t]} server {s.cpu_per_run() * 1000:.2f}, "
        f"client {s.client_cpu / len(s.results) * 1000:.2f}"
        for t, s in series.items()
        if s.results
    )


async def run(bench: Bench) -> None:
    fast = latency.scenarios(bench)[0]
    steps, used = plan(bench), transports(bench)
    if bench.stack.ref:
        bench.note(
            f"fig 10: the rows marked B ran on a second Parley of commit {bench.stack.ref.commit}"
            " (its own worktree and database), in the same rounds as this code's"
        )
    bar = tqdm(total=sum(rounds for _, rounds in steps), desc="fig 10 /v1", unit="round")
    try:
        for clients, rounds in steps:
            bar.set_postfix_str(f"×{clients}")
            series = await latency.measure(bench, used, fast, clients, rounds, used, bar)
            where = latency.where(fast, clients)
            latency.note_failures(bench, "fig 10, {} · " + where, series)
            bench.note(f"fig 10, {where}: CPU per run, ms: {_cpu(series)}")
            if clients > 1:  # the spread of the rounds, to tell a difference from noise
                batches = latency.batches(series)
                bench.note(f"fig 10, {where}: first-token p95 of each batch, ms: {batches}")
            _rows(bench, clients, series)
            if bench.stack.ref:
                _rows(bench, clients, series, "_b")
    finally:
        bar.close()
