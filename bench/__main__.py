"""`python -m bench`: start the stack, measure the chosen figures, print the table, clean up."""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from tqdm import tqdm

from bench import (
    admin,
    capacity,
    compare,
    dashboard,
    datasets,
    dbwork,
    deployed,
    evaluation,
    frames,
    latency,
    lists,
    openai_door,
    purge,
)
from bench.context import Bench, Fixtures, Options
from bench.report import render
from bench.servers import Stack, deployed_problem

FIGURES: dict[str, Callable[[Bench], Awaitable[None]]] = {
    "latency": latency.run,
    "deployed": deployed.run,
    "frames": frames.run,
    "capacity": capacity.run,
    "dbwork": dbwork.run,
    "lists": lists.run,
    "admin": admin.run,
    "dashboard": dashboard.run,
    "datasets": datasets.run,
    "evaluation": evaluation.run,
    "openai": openai_door.run,
    "purge": purge.run,
    "compare": compare.run,  # only with --against
}
ALIASES = {
    "1": "latency",
    "1d": "deployed",
    "2": "capacity",
    "3": "dbwork",
    "4": "lists",
    "5": "frames",
    "6": "dashboard",
    "7": "admin",
    "8": "datasets",
    "9": "evaluation",
    "10": "openai",
    "11": "purge",
}
# Figures that, given --against-ref alone, set B beside A themselves.
OWN_REF = (["evaluation"], ["openai"])
# The whole benchmark stops here whatever happens, well after a full run on a slow machine.
DEADLINE = 30 * 60.0


def parse(argv: list[str] | None = None) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes; under two minutes")
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="FIGURE",
        help=f"figures to run: {', '.join(FIGURES)} (or 1-11, 1d); default all",
    )
    parser.add_argument("--clients", type=int, default=100, help="concurrent clients in fig 1")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--redis", action="store_true", help="channel layer on Redis (db 14)")
    parser.add_argument("--capacity-levels", type=int, nargs="+", default=[], metavar="N")
    parser.add_argument("--capacity-transport", choices=["ws", "sse"], default="ws")
    parser.add_argument(
        "--against",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="instead of the figures, compare Parley with a second Parley started with these "
        "settings (e.g. PARLEY_TUNE_GC=false), fig 1's rounds at many clients in turn",
    )
    parser.add_argument(
        "--against-ref",
        default="",
        metavar="REV",
        help="as --against, but the second Parley runs the code of this commit (from a git "
        "worktree, with a database of its own); with --against, also those settings; with "
        "--only evaluation, fig 9's experiments run by this commit's code beside them; with "
        "--only openai, fig 10's /v1 and SSE runs on it too, in the same rounds",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy profile of Parley (with --only deployed, of its first daphne process): "
        "a flame graph (.svg) or collapsed stacks (.txt)",
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="fig 1d's serve --workers N (default: one per core)"
    )
    parser.add_argument("--output", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    only = [ALIASES.get(name, name) for name in args.only]
    unknown = [name for name in only if name not in FIGURES or name == "compare"]
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(unknown)}")
    settings = [item.partition("=") for item in args.against]
    if any(not name or not sep for name, sep, _ in settings):
        parser.error("--against takes NAME=VALUE settings")
    against = {name: value for name, _, value in settings}
    # Figs 9 and 10 take --against-ref themselves: B's experiments run by the other commit's
    # code; B's door and REST API in the same rounds.
    if (against or args.against_ref) and only and (against or only not in OWN_REF):
        parser.error(
            "--against and --against-ref run their own comparison; leave out --only "
            "(or give --against-ref with --only evaluation, or --only openai)"
        )
    opts = Options(
        quick=args.quick,
        only=only,
        clients=args.clients,
        db=args.db,
        redis=args.redis,
        capacity_levels=sorted(args.capacity_levels),
        capacity_transport=args.capacity_transport,
        against=against,
        against_ref=args.against_ref,
        workers=args.workers,
    )
    return opts, args


def cpu_check() -> float:
    """Milliseconds this machine takes for a fixed piece of pure Python (median of five).

    Machines of one kind differ in speed, and every absolute figure of a run carries that along,
    the ratios much less. Printed with the table, so two tables can be told apart by their
    machines before their code."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        sum(i * i for i in range(1_000_000))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _selected(opts: Options) -> list[str]:
    if opts.against_ref and opts.only in OWN_REF:
        return opts.only
    if opts.against or opts.against_ref:
        return ["compare"]
    return [name for name in FIGURES if name != "compare" and (not opts.only or name in opts.only)]


def setup(bench: Bench, figures: list[str]) -> None:
    stack, opts = bench.stack, bench.opts
    total = 5 + (2 if opts.against_ref else 0) + ("deployed" in figures)
    steps = tqdm(total=total, desc="setup", unit="step")
    try:
        stack.start_upstream()
        steps.update()
        stack.manage("migrate", "--run-syncdb", "--noinput")
        steps.update()
        scenarios = [step.scenario for step in latency.plan(bench)] + [capacity.scenario(bench)]
        models = sorted({sc.model for sc in scenarios})
        needed = 2  # figure 5 on its own
        if "latency" in figures:
            needed += latency.sessions_needed(bench)
        if "capacity" in figures:
            needed += capacity.sessions_needed(bench)
        if "compare" in figures:
            needed += compare.sessions_needed(bench)
        if "openai" in figures:
            needed += openai_door.sessions_needed(bench)
        if "deployed" in figures:  # one process, beside the deployed shape
            needed += deployed.sessions_needed(bench)
        if "purge" in figures:
            needed += purge.sessions_needed(bench)
        fixtures = ["fixtures", "--sessions", str(needed), "--models", *models]
        data = stack.helper(*fixtures)
        bench.token, bench.cookie = data["token"], data["cookie"]
        bench.agents, bench.sessions = data["agents"], data["sessions"]
        steps.update()
        ref = None
        if opts.against_ref:  # another commit's code, migrated and seeded by that code
            ref = stack.checkout(opts.against_ref)
            steps.update()
            stack.manage("migrate", "--run-syncdb", "--noinput", ref=ref)
            data = stack.helper(*fixtures, ref=ref)
            bench.ref = Fixtures(data["token"], data["cookie"], data["agents"], data["sessions"])
            steps.update()
        stack.start_daphne("parley", "project.asgi:application", "project.settings")
        if opts.against or ref:  # bench/compare.py: other settings, or another commit's code
            app, settings = "project.asgi:application", "project.settings"
            stack.start_daphne("parley_b", app, settings, ref, **opts.against)
        steps.update()
        if {"latency", "frames", "capacity"} & set(figures):
            stack.start_daphne("naive", "bench.naive.asgi:application", "bench.naive.settings")
        steps.update()
        if "deployed" in figures:  # on a PostgreSQL database and a Redis database of its own
            deployed.start(bench, models)
            steps.update()
    finally:
        steps.close()
    if opts.db == "postgres":
        bench.note("database: PostgreSQL (scratch database parley_bench)")


def _profiled(bench: Bench, figures: list[str]) -> int:
    """The process to profile: the one-process Parley, or, when fig 1d runs alone, the first
    of its daphne processes (the others do the same work)."""
    if figures != ["deployed"]:
        return bench.stack.pid("parley")
    parts = bench.stack.processes(deployed.SERVER)
    return next(pid for pid, part in parts.items() if part == "daphne 1")


def start_profiler(bench: Bench, path: Path, pid: int) -> subprocess.Popen[bytes]:
    py_spy = Path(sys.executable).with_name("py-spy")
    # flame.svg: a flame graph; stacks.txt: collapsed stacks, one line each, to sum with a script.
    fmt = "raw" if path.suffix == ".txt" else "flamegraph"
    return subprocess.Popen(
        [str(py_spy), "record", "-o", str(path), "--format", fmt, "--pid", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def measure(bench: Bench, figures: list[str]) -> None:
    async with asyncio.timeout(DEADLINE):
        for name in figures:
            await FIGURES[name](bench)


def main(argv: list[str] | None = None) -> int:
    opts, args = parse(argv)
    figures = _selected(opts)
    # Fig 1d needs PostgreSQL, Redis and nginx: without them a full run goes on without it.
    missing = deployed_problem() if "deployed" in figures else None
    if missing and opts.only:
        print(f"fig 1d (deployed) cannot run: {missing}", file=sys.stderr)
        return 1
    if missing:
        figures.remove("deployed")
    # SIGTERM unwinds like Ctrl-C, so `finally` stops the servers and drops the database.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    check = cpu_check()
    stack = Stack(db=opts.db, redis=opts.redis)
    bench = Bench(opts=opts, stack=stack)
    if missing:
        bench.note(f"fig 1d (deployed) left out: {missing}")
    profiler: subprocess.Popen[bytes] | None = None
    try:
        setup(bench, figures)
        if args.profile:
            profiler = start_profiler(bench, args.profile, _profiled(bench, figures))
        asyncio.run(measure(bench, figures))
    except Exception as exc:
        for name in stack.procs:
            print(f"--- {name} log ---\n{stack.log_tail(name)}", file=sys.stderr)
        print(f"benchmark failed: {exc!r}", file=sys.stderr)
        if not bench.rows:
            return 1
    finally:
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            try:
                profiler.wait(30)
            except subprocess.TimeoutExpired:
                profiler.kill()
        stack.close()
    elapsed = time.monotonic() - started
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    # Other work on the machine shows in latencies (not in CPU per run): say how busy it was.
    bench.note(
        f"load average (1 min) {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
        f"; CPU check (sum of a million squares, pure Python) {check:.0f} ms"
    )
    bench.note(
        f"{command.strip()} · {os.cpu_count()} cores · {platform.python_implementation()} "
        f"{platform.python_version()} · {opts.db} · finished in {elapsed:.0f} s"
    )
    table = render(bench.rows, bench.notes)
    print(table)
    if args.output:
        args.output.write_text(table + "\n")
    # Missed targets are findings, reported in the table, not failures of the benchmark.
    return 0


if __name__ == "__main__":
    sys.exit(main())
