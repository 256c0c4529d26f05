"""Figure 8: dataset exports, every format, at 10,000 and 100,000 items: throughput, and memory
that stays flat as the dataset grows tenfold (items are read in pages of 500).

Seeded by the helper process with bulk inserts (bench/datasetdata.py); each export runs in a
fresh helper process writing to /dev/null, timed once, then measured once more under
tracemalloc. Memory is the rise of the process's peak RSS above what it held warmed up, and the
Python heap's peak; the reference column is the same figure at the smaller size.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tqdm import tqdm

from bench.context import Bench
from bench.report import Row

SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
# Flat: ten times the items may not take more than this much more memory.
FLAT = 1.5
MB = 1024 * 1024


async def _measure(bench: Bench, sizes: tuple[int, ...]) -> dict[tuple[int, str], Any]:
    stack = bench.stack
    measured: dict[tuple[int, str], Any] = {}
    bar = tqdm(total=len(sizes) * 6, desc="fig 8 datasets", unit="step")
    try:
        for size in sizes:
            bar.set_postfix_str(f"seeding {size:,} items")
            seeded = await asyncio.to_thread(stack.helper, "seed-datasets", "--items", str(size))
            bar.update()
            for fmt in seeded["formats"]:
                bar.set_postfix_str(f"{fmt}, {size:,} items")
                measured[size, fmt] = await asyncio.to_thread(
                    stack.helper, "export-dataset", "--name", seeded["name"], "--format", fmt
                )
                bar.update()
    finally:
        bar.close()
    return measured


async def run(bench: Bench) -> None:
    sizes = QUICK_SIZES if bench.opts.quick else SIZES
    small, large = sizes
    measured = await _measure(bench, sizes)
    formats = [fmt for size, fmt in measured if size == small]
    for fmt in formats:
        for size in sizes:
            m = measured[size, fmt]
            bench.add(
                Row("8", f"export {fmt}, {size:,} items ({m['items']:,} written)", "items/s",
                    (m["items"] / m["seconds"], None), lower_is_better=False)
            )  # fmt: skip
        for key, what in (("rss_growth", "peak RSS growth"), ("heap", "Python heap peak")):
            before, after = measured[small, fmt][key] / MB, measured[large, fmt][key] / MB
            # Below a megabyte the ratio is noise; flat means it stays small.
            flat = after <= max(before * FLAT, 1.0)
            bench.add(
                Row("8", f"export {fmt}, {what}, {large:,} items", "MB", (after, None),
                    reference=f"{small:,} items", ref=(before, None),
                    target=f"≤ {FLAT}× the {small:,}-item figure", passed=flat)
            )  # fmt: skip
