"""Figure 8's helper side: a dataset of N accepted items seeded with bulk inserts, and one
export of it timed and measured in a fresh process. Called by bench.dbtool, which has
configured Django.

Items look like curated conversations: a system message, a question and an answer of a few
hundred characters; one in ten has a tool round, one in five a correction (so preferences have
something to write), one in twenty is rated down and weighted.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

from bench import memory, seeding
from bench.items import fresh_dataset, text
from datasets_app.export import FORMATS, lines
from datasets_app.export.stream import format_items
from datasets_app.models import Dataset

TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def _messages(rng: random.Random, n: int) -> list[dict[str, Any]]:
    question = f"Question {n}: {text(rng, 30)}"
    answer = {"role": "assistant", "content": text(rng, 80)}
    if n % 20 == 0:
        answer["rating"] = -1
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant. Be brief."},
        {"role": "user", "content": question},
    ]
    if n % 10 == 0:
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "lookup", "arguments": {"query": question[:40]}}}  # fmt: skip
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": text(rng, 20)},
        ]
    return [*messages, answer]


def _item(rng: random.Random, n: int) -> dict[str, Any]:
    return {
        "messages": _messages(rng, n),
        "tools": [TOOL] if n % 10 == 0 else [],
        "corrected_answer": "A better answer." if n % 5 == 0 else "",
        "use_weights": n % 20 == 0,
    }


def seed(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    owner = seeding.user("bench_datasets")
    name = f"bench-{args.items}"
    fresh_dataset(name, args.items, owner, _item)
    seeding.settle()
    return {"seconds": round(time.perf_counter() - started, 1), "name": name, "formats": FORMATS}


def _export(dataset: Dataset, format: str) -> None:
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for line in lines(dataset, format):
            sink.write(line)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One export to /dev/null: its time, how far the process's peak memory rose above what it
    held once warmed up (Django loaded, a first page exported), and the Python heap's peak."""
    dataset = Dataset.objects.get(name=args.name)
    items = format_items(dataset, args.format).count()
    # The header (csv) and a first page: pages, not lines, are what an export yields.
    for _ in zip(range(2), lines(dataset, args.format), strict=False):
        pass
    with memory.rise(trace=False) as timed:
        started = time.perf_counter()
        _export(dataset, args.format)
        seconds = time.perf_counter() - started
    # Again under tracemalloc (slower, so untimed): the Python heap's peak during the export.
    with memory.rise(trace=True) as traced:
        _export(dataset, args.format)
    return {"items": items, "seconds": seconds, **timed, "heap": traced["heap"]}
