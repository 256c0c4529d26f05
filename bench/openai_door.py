"""Figure 10: the OpenAI-compatible door. The same streamed runs through `POST
/v1/chat/completions` (the session named by its header, OpenAI's chunks) and through `POST
/api/runs` with SSE, on the same server, batch by batch in turn: first token and throughput,
at one client and at many, against the fast upstream."""

from __future__ import annotations

import statistics

from tqdm import tqdm

from bench import latency
from bench.context import Bench
from bench.report import Row

TRANSPORTS = ("sse", "v1")
WITHIN = 0.10  # the door may cost this much of the REST API's first token and throughput


def plan(bench: Bench) -> list[tuple[int, int]]:
    """(clients, rounds): an even number of rounds, so each goes first in half of them."""
    quick = bench.opts.quick
    _, _, many = latency.scenarios(bench)
    return [(1, 4 if quick else 20), (many, 2 if quick else 6)]


def sessions_needed(bench: Bench) -> int:
    return sum(clients for clients, _ in plan(bench))  # SSE's; /v1 makes its own


def _rows(bench: Bench, clients: int, series: dict[str, latency.Series]) -> None:
    where = latency.where(latency.scenarios(bench)[0], clients)
    latency.note_failures(bench, "fig 10, {} · " + where, series)
    mine, ref = series["v1"], series["sse"]
    if not mine.ttft() or not ref.ttft():
        return  # nothing to compare: the notes say why
    first = (
        (f"TTFT · {where}", mine.ttft(), ref.ttft())
        if clients == 1
        else (f"TTFT · median of batch p95 · {where}", mine.ttft_p95_by_batch(),
              ref.ttft_p95_by_batch())
    )  # fmt: skip
    label, a, b = first
    bench.add(
        Row("10", f"/v1 {label}", "ms", latency.pair(a), reference="/api/runs SSE",
            ref=latency.pair(b), target=f"≤ {1 + WITHIN:.2f} × SSE",
            passed=statistics.median(a) <= (1 + WITHIN) * statistics.median(b))
    )  # fmt: skip
    a, b = mine.throughputs, ref.throughputs
    bench.add(
        Row("10", f"/v1 throughput · {where}", "tok/s", latency.pair(a),
            reference="/api/runs SSE", ref=latency.pair(b), target=f"≥ {1 - WITHIN:.2f} × SSE",
            passed=statistics.median(a) >= (1 - WITHIN) * statistics.median(b),
            lower_is_better=False)
    )  # fmt: skip


async def run(bench: Bench) -> None:
    fast = latency.scenarios(bench)[0]
    steps = plan(bench)
    bar = tqdm(total=sum(rounds for _, rounds in steps), desc="fig 10 /v1", unit="round")
    try:
        for clients, rounds in steps:
            bar.set_postfix_str(f"×{clients}")
            series = await latency.measure(
                bench, TRANSPORTS, fast, clients, rounds, TRANSPORTS, bar
            )
            _rows(bench, clients, series)
    finally:
        bar.close()
