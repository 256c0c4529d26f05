"""Figure 5: WebSocket frames and bytes sent per run, Parley (coalesced) against Naive (a frame
per token). Taken from figure 1's one-client WebSocket runs when they ran, else measured here."""

from __future__ import annotations

from bench import latency
from bench.context import Bench
from bench.report import Row
from bench.stats import p50, p95


async def run(bench: Bench) -> None:
    for step in latency.plan(bench):
        if step.clients != 1:
            continue
        scenario = step.scenario
        series = bench.shared.get(("latency", scenario.name, 1))
        if series is None:
            pair = ("ws", "naive")
            series = await latency.measure(bench, pair, scenario, 1, 1, warmup=pair)
        mine, ref = series["ws"].ok, series["naive"].ok
        if not mine or not ref:
            bench.note(f"fig 5 · {scenario.name}: no completed runs to count frames of.")
            continue
        for unit, key in (("frames", "frames"), ("bytes", "bytes")):
            values = [float(getattr(r, key)) for r in mine]
            ref_values = [float(getattr(r, key)) for r in ref]
            bench.add(
                Row(
                    "5",
                    f"WS {unit} per run · {scenario.tokens} tokens {scenario.name}",
                    unit,
                    (p50(values), p95(values)),
                    "Naive WS",
                    (p50(ref_values), p95(ref_values)),
                )
            )
