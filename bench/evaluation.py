"""Figure 9: evaluation. Trials per second of an experiment (a dataset's items by two agent
versions, concurrency 20, scored with `exact`) against the same model calls made directly, and
memory that stays flat as the dataset grows tenfold.

Seeded by the helper process with bulk inserts (bench/evaldata.py). Every measure runs in a
fresh helper process, after a warm-up experiment (or the warm-up's calls): Parley runs the
experiment as `manage.py evaluate` does (`run_experiment`); the reference makes the same
streamed calls with the same messages through the `openai` client, 20 at a time, and stores
nothing. The two take turns, the first going second the next round, and each keeps its best
round: the machine's other work slows one round or another, not one side. Memory is the rise
of the process's peak RSS above what it held warmed up, one run per size; the Python heap's
peak comes from runs under tracemalloc (three to four times slower, so on smaller datasets).
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from tqdm import tqdm

from bench.context import Bench
from bench.report import Row

# The answers: fig 1's fast script (200 tokens at once), and short ones (20 tokens at once),
# where what Parley does per trial weighs most against the call itself.
SCRIPTS = (200, 20)
LABELS = {200: "fast, 200 tokens", 20: "short, 20 tokens"}
MEMORY_SCRIPT = 20
ITEMS, QUICK_ITEMS = 1_000, 200
ROUNDS, QUICK_ROUNDS = 2, 1
SIZES, QUICK_SIZES = (1_000, 10_000), (200, 2_000)
HEAP_SIZES, QUICK_HEAP_SIZES = (200, 2_000), (50, 500)
TARGET = 0.8
# Flat: ten times the items may not take more than this much more memory.
FLAT = 1.5
MB = 1024 * 1024
Results = dict[str, list[dict[str, Any]]]


class Plan:
    def __init__(self, quick: bool) -> None:
        self.items = QUICK_ITEMS if quick else ITEMS
        self.rounds = QUICK_ROUNDS if quick else ROUNDS
        self.sizes = QUICK_SIZES if quick else SIZES
        self.heap_sizes = QUICK_HEAP_SIZES if quick else HEAP_SIZES

    def steps(self, kinds: int) -> int:
        measures = kinds * len(SCRIPTS) * self.rounds + len(self.sizes) + len(self.heap_sizes)
        return kinds - 1 + measures  # a seeding each for Parley and B


def _kinds(bench: Bench) -> tuple[str, ...]:
    """Parley, the direct calls and, with --against-ref, B: the other commit's Parley."""
    return ("parley", "direct", "parley_b") if bench.stack.ref else ("parley", "direct")


async def _helper(bench: Bench, *args: str, b: bool = False) -> dict[str, Any]:
    """`b`: with B's code and database (--against-ref)."""
    ref = bench.stack.ref if b else None
    return await asyncio.to_thread(bench.stack.helper, *args, ref=ref)


async def _throughput(
    bench: Bench, plan: Plan, seeded: dict[str, dict[str, Any]], bar: tqdm
) -> dict[int, Results]:
    """Per script, each kind's results, round by round, taking turns: each round starts one
    kind later than the last."""
    kinds = _kinds(bench)
    found: dict[int, Results] = {tokens: {kind: [] for kind in kinds} for tokens in SCRIPTS}
    for round_ in range(plan.rounds):
        for tokens in SCRIPTS:
            shift = round_ % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                bar.set_postfix_str(f"{kind}, {tokens} tokens, round {round_ + 1}")
                of = seeded["parley_b" if kind == "parley_b" else "parley"]
                name, versions = of["names"][str(plan.items)], of["versions"][str(tokens)]
                command = "eval-direct" if kind == "direct" else "eval-parley"
                result = await _helper(
                    bench, command, "--name", name, "--versions", *versions, b=kind == "parley_b"
                )
                found[tokens][kind].append(result)
                bar.update()
    return found


async def _memory(
    bench: Bench, seeded: dict[str, Any], sizes: tuple[int, ...], bar: tqdm, trace: bool
) -> dict[int, dict[str, Any]]:
    versions = seeded["versions"][str(MEMORY_SCRIPT)]
    found = {}
    for size in sizes:
        bar.set_postfix_str(f"{'heap' if trace else 'memory'}, {size:,} items")
        args = ["eval-parley", "--name", seeded["names"][str(size)], "--versions", *versions]
        found[size] = await _helper(bench, *args, *(["--trace"] if trace else []))
        bar.update()
    return found


def _rate(result: dict[str, Any]) -> float:
    """Answers stored (or calls that finished) per second of the run."""
    return result.get("completed", result.get("ok", 0)) / result["seconds"]


def _per_call(result: dict[str, Any]) -> float:
    return result["cpu"] / max(result.get("trials", result.get("calls", 0)), 1)


def _throughput_rows(bench: Bench, plan: Plan, found: dict[int, Results]) -> None:
    for tokens, results in found.items():
        parley = max(_rate(r) for r in results["parley"])
        direct = max(_rate(r) for r in results["direct"])
        what = f"{plan.items:,} items × 2 versions · {LABELS[tokens]}"
        bench.add(
            Row("9", f"experiment trials/s · {what}", "trials/s", (parley, None),
                reference="the same calls made directly", ref=(direct, None),
                target=f"≥ {TARGET} × direct", passed=parley >= TARGET * direct,
                lower_is_better=False)
        )  # fmt: skip
        cpu = min(_per_call(r) for r in results["parley"])
        cpu_direct = min(_per_call(r) for r in results["direct"])
        bench.add(
            Row("9", f"CPU per trial · {LABELS[tokens]}", "ms", (cpu, None),
                reference="the same calls made directly", ref=(cpu_direct, None))
        )  # fmt: skip
        if "parley_b" in results:
            b = max(_rate(r) for r in results["parley_b"])
            bench.add(
                Row("9 A/B", f"experiment trials/s · {what}", "trials/s", (parley, None),
                    reference=f"B: {bench.stack.ref.commit}", ref=(b, None),
                    lower_is_better=False)
            )  # fmt: skip
        rounds = "; ".join(
            f"{kind} " + ", ".join(f"{_rate(r):,.0f}" for r in runs)
            for kind, runs in results.items()
        )
        scoring = statistics.median(r["seconds"] - r["answering"] for r in results["parley"])
        bench.note(
            f"fig 9, {LABELS[tokens]}: trials/s by round, {rounds} (best kept); Parley's runs "
            f"end with {scoring:.2f} s of scoring (median), included; concurrency 20 on both"
        )


def _memory_rows(
    bench: Bench, measured: dict[int, dict[str, Any]], heaps: dict[int, dict[str, Any]]
) -> None:
    small, large = sorted(measured)
    what = f"{large:,} items × 2 versions · {MEMORY_SCRIPT} tokens"
    bench.add(
        Row("9", f"experiment trials/s · {what}", "trials/s", (_rate(measured[large]), None),
            reference=f"{small:,} items", ref=(_rate(measured[small]), None),
            lower_is_better=False)
    )  # fmt: skip
    pairs = (("rss_growth", "peak RSS growth", measured), ("heap", "Python heap peak", heaps))
    for key, what, runs in pairs:
        low, high = sorted(runs)
        before, after = runs[low][key] / MB, runs[high][key] / MB
        # Below a megabyte the ratio is noise; flat means it stays small.
        flat = after <= max(before * FLAT, 1.0)
        bench.add(
            Row("9", f"experiment {what} · {high:,} items", "MB", (after, None),
                reference=f"{low:,} items", ref=(before, None),
                target=f"≤ {FLAT}× the {low:,}-item figure", passed=flat)
        )  # fmt: skip


def _check(bench: Bench, results: list[dict[str, Any]]) -> None:
    """A run that did not answer, or score, every trial measured something else: say so."""
    for r in results:
        if "trials" in r and not r["trials"] == r["completed"] == r["scored"]:
            bench.note(
                f"fig 9: an experiment ended {r['status']} with {r['completed']} of "
                f"{r['trials']} trials answered and {r['scored']} scored"
            )
        if "calls" in r and r["ok"] != r["calls"]:
            bench.note(f"fig 9: {r['calls'] - r['ok']} of {r['calls']} direct calls failed")


async def run(bench: Bench) -> None:
    plan = Plan(bench.opts.quick)
    sizes = sorted({plan.items, *plan.sizes, *plan.heap_sizes})
    tokens = [str(t) for t in SCRIPTS]
    kinds = _kinds(bench)
    bar = tqdm(total=plan.steps(len(kinds)), desc="fig 9 evaluation", unit="step")
    try:
        seeded = {}
        for kind in ("parley", "parley_b")[: len(kinds) - 1]:
            bar.set_postfix_str(f"seeding {kind}")
            # B seeds only what its rounds run; the memory runs are Parley's alone.
            items = [str(size) for size in (sizes if kind == "parley" else [plan.items])]
            seed = ["seed-eval", "--items", *items, "--tokens", *tokens]
            seeded[kind] = await _helper(bench, *seed, b=kind == "parley_b")
            bar.update()
        found = await _throughput(bench, plan, seeded, bar)
        measured = await _memory(bench, seeded["parley"], plan.sizes, bar, trace=False)
        heaps = await _memory(bench, seeded["parley"], plan.heap_sizes, bar, trace=True)
    finally:
        bar.close()
    runs = [r for results in found.values() for kind in results.values() for r in kind]
    _check(bench, [*runs, *measured.values(), *heaps.values()])
    _throughput_rows(bench, plan, found)
    _memory_rows(bench, measured, heaps)
