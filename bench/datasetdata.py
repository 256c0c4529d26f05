"""Figure 8's helper side: a dataset of N accepted items seeded with bulk inserts, and one
export of it timed and measured in a fresh process. Called by bench.dbtool, which has
configured Django.

Items look like curated conversations: a system message, a question and an answer of a few
hundred characters; one in ten has a tool round, one in five a correction (so preferences have
something to write), one in twenty is rated down and weighted.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import time
import tracemalloc
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from bench import seeding
from datasets_app.export import FORMATS, lines
from datasets_app.export.stream import format_items
from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus
from datasets_app.services.collect import split_for
from datasets_app.services.snapshot import content_hash

SLICE = 10_000
WORDS = "the of and to in is that for it as with was on be by this are or from at".split()
TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _messages(rng: random.Random, n: int) -> list[dict[str, Any]]:
    question = f"Question {n}: {_text(rng, 30)}"
    answer = {"role": "assistant", "content": _text(rng, 80)}
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
            {"role": "tool", "tool_call_id": f"call_{n}", "content": _text(rng, 20)},
        ]
    return [*messages, answer]


def _slice(dataset: Dataset, owner: Any, first: int, count: int) -> None:
    rng = random.Random(first)
    start = timezone.now() - timedelta(days=30)
    ids = [uuid.uuid4() for _ in range(count)]
    conversations = [_messages(rng, first + i) for i in range(count)]
    corrected = ["A better answer." if (first + i) % 5 == 0 else "" for i in range(count)]
    moments = [start + timedelta(seconds=first + i) for i in range(count)]
    seeding.write(
        DatasetItem,
        count,
        {
            "item_id": ids,
            "messages": conversations,
            "tools": [[TOOL] if (first + i) % 10 == 0 else [] for i in range(count)],
            "corrected_answer": corrected,
            "use_weights": [(first + i) % 20 == 0 for i in range(count)],
            "split": [split_for(dataset, item_id) for item_id in ids],
            "content_hash": [
                content_hash(m, c) for m, c in zip(conversations, corrected, strict=True)
            ],
            "source_created_at": moments,
            "created_at": moments,
        },
        dataset_id=dataset.pk,
        owner_id=owner.pk,
        source=ItemSource.RUN,
        model="bench-model",
        status=ItemStatus.ACCEPTED,
    )


def seed(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    owner = seeding.user("bench_datasets")
    name = f"bench-{args.items}"
    Dataset.objects.filter(name=name).delete()
    dataset = Dataset.objects.create(name=name)
    for first in range(0, args.items, SLICE):
        with transaction.atomic():
            _slice(dataset, owner, first, min(SLICE, args.items - first))
    seeding.settle()
    return {"seconds": round(time.perf_counter() - started, 1), "name": name, "formats": FORMATS}


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One export to /dev/null: its time, how far the process's peak memory rose above what it
    held once warmed up (Django loaded, a first page exported), and the Python heap's peak."""
    dataset = Dataset.objects.get(name=args.name)
    items = format_items(dataset, args.format).count()
    # The header (csv) and a first page: pages, not lines, are what an export yields.
    for _ in zip(range(2), lines(dataset, args.format), strict=False):
        pass
    gc.collect()
    before = _rss()
    started = time.perf_counter()
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for line in lines(dataset, args.format):
            sink.write(line)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # Again under tracemalloc (slower, so untimed): the Python heap's peak during the export.
    tracemalloc.start()
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for line in lines(dataset, args.format):
            sink.write(line)
    _, heap = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"items": items, "seconds": seconds, "rss_growth": max(peak - before, 0), "heap": heap}
