"""Figure 3: database work per run, for a 20-token and a 2 000-token answer, Parley against Naive.

Counted in a helper process running the engine itself (and the naive consumer through Channels'
test communicator) against the scripted upstream: every SQL statement from every thread, and the
rows each write touched. Parley's count must not grow with the answer except for checkpoints.
"""

from __future__ import annotations

import asyncio

from bench.context import Bench
from bench.report import Row
from bench.upstream import model_name

SHORT, LONG = model_name(20, 0), model_name(2000, 0)


async def run(bench: Bench) -> None:
    counts = await asyncio.to_thread(bench.stack.helper, "dbwork", "--models", SHORT, LONG)
    parley, naive = counts["parley"], counts["naive"]
    for model, label in ((SHORT, "20-token"), (LONG, "2 000-token")):
        mine, ref = parley[model], naive[model]
        bench.add(
            Row(
                "3",
                f"queries per {label} run",
                "queries",
                (mine["queries"], None),
                "Naive",
                (ref["queries"], None),
            )
        )
        row = Row(
            "3",
            f"rows written per {label} run",
            "rows",
            (mine["rows_written"], None),
            "Naive",
            (ref["rows_written"], None),
        )
        if model == LONG:
            row.target = "≤ 0.10 × Naive"
            row.passed = mine["rows_written"] * 10 <= ref["rows_written"]
        bench.add(row)
    short, long = parley[SHORT], parley[LONG]
    same = (
        short["queries"] - short["checkpoints"] == long["queries"] - long["checkpoints"]
        and short["writes"] - short["checkpoints"] == long["writes"] - long["checkpoints"]
    )
    bench.add(
        Row(
            "3",
            "Parley 2 000-token minus 20-token queries",
            "queries",
            (long["queries"] - short["queries"], None),
            target=f"= checkpoints ({long['checkpoints'] - short['checkpoints']})",
            passed=same,
        )
    )
    bench.note(
        f"fig 3: write statements per run, Parley {short['writes']} / {long['writes']} "
        f"(20 / 2 000 tokens, checkpoints {short['checkpoints']} / {long['checkpoints']}), "
        f"Naive {naive[SHORT]['writes']} / {naive[LONG]['writes']}."
    )
