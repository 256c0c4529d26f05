"""Figure 9's helper side: a dataset of N accepted items and two versions of an agent, seeded
with bulk inserts; then, each in a fresh process, an experiment over them run as the `evaluate`
command runs one, or the same model calls made directly. Called by bench.dbtool, which has
configured Django.

Items are short conversations (a system message, a question, an answer). The agents ask an
upstream script that answers at once (`bench:200:0`, 200 tokens, or `bench:20:0`), so what is
measured is what Parley does around a model call, not the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from typing import Any

import httpx
import openai
from django.conf import settings

from bench import memory, seeding
from bench.items import fresh_dataset, text
from bench.upstream import model_name
from datasets_app.models import Dataset
from evals_app import replay, runner
from evals_app.experiments import accepted_items, create_experiment
from evals_app.models import Experiment, Trial, TrialStatus
from sessions_app.llm import pool
from sessions_app.models import Agent, AgentVersion

CONCURRENCY = 20
# The warm-up before anything is measured: imports, first queries, the model client's
# connections; its own dataset, so the measured experiment's items are all new to it.
WARM_ITEMS = 40
WARM_NAME = "bench-eval-warm"
INSTRUCTIONS = ("You are a helpful assistant. Be brief.", "You are a helpful assistant. Be kind.")


def _item(rng: random.Random, n: int) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"Question {n}: {text(rng, 20)}"},
            {"role": "assistant", "content": text(rng, 20)},
        ]
    }


def _versions(model: str) -> list[str]:
    """The live versions of two agents on the script, differing in their instructions."""
    found = []
    for i, instructions in enumerate(INSTRUCTIONS):
        agent, _ = Agent.objects.update_or_create(
            name=f"bench eval {'AB'[i]} {model}",
            defaults={"model": model, "instructions": instructions},
        )
        found.append(str(agent.live_version_id))
    return found


def seed(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    owner = seeding.user("bench_eval")
    if not Dataset.objects.filter(name=WARM_NAME).exists():
        fresh_dataset(WARM_NAME, WARM_ITEMS, owner, _item)
    names = {}
    for size in args.items:
        names[size] = f"bench-eval-{size}"
        fresh_dataset(names[size], size, owner, _item)
    seeding.settle()
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "names": names,
        "versions": {tokens: _versions(model_name(tokens, 0)) for tokens in args.tokens},
    }


def _cpu() -> float:
    """CPU seconds this process has used (every thread, user and system)."""
    times = os.times()
    return times.user + times.system


def _experiment(name: str, version_ids: list[str]) -> Experiment:
    versions = list(AgentVersion.objects.filter(pk__in=version_ids).order_by("agent__name"))
    return create_experiment(
        dataset=Dataset.objects.get(name=name),
        versions=versions,
        baseline=versions[0],
        scorers=["exact"],
        concurrency=CONCURRENCY,
        name=f"bench {name}",
    )


async def _run(experiment: Experiment) -> dict[str, Any]:
    """The experiment run here to its end: its wall time, and when its last answer was written
    (the rest is scoring and ending it)."""
    started = time.perf_counter()
    answered: list[float] = []

    def progress(found: dict[str, Any]) -> None:
        if not answered and found["done"] >= found["total"]:
            answered.append(time.perf_counter() - started)

    ended = await runner.run_experiment(experiment.pk, progress)
    seconds = time.perf_counter() - started
    return {"status": ended.status, "seconds": seconds, "answering": answered[0] if answered else 0}


def _outcome(experiment: Experiment) -> dict[str, int]:
    trials = Trial.objects.filter(experiment=experiment)
    return {
        "trials": trials.count(),
        "completed": trials.filter(status=TrialStatus.COMPLETED).count(),
        "scored": trials.filter(scores__scorer="exact", scores__value__isnull=False).count(),
    }


async def _parley(args: argparse.Namespace) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    warm = await sync_to_async(_experiment)(WARM_NAME, args.versions)
    await _run(warm)
    with memory.rise(args.trace) as grown:
        began, cpu = time.perf_counter(), _cpu()
        experiment = await sync_to_async(_experiment)(args.name, args.versions)
        created = time.perf_counter() - began
        timed = await _run(experiment)
        timed["cpu"] = _cpu() - cpu
    await pool.close_clients()
    outcome = await sync_to_async(_outcome)(experiment)
    return {**timed, **outcome, **grown, "create_seconds": created}


def measure_parley(args: argparse.Namespace) -> dict[str, Any]:
    """An experiment over the dataset's items by both versions, at concurrency 20, scored with
    `exact`, run in this process as `manage.py evaluate` runs one; after a warm-up experiment."""
    return asyncio.run(_parley(args))


# -- the same calls made directly -------------------------------------------------------------


def _requests(name: str, version_ids: list[str]) -> list[dict[str, Any]]:
    """The bodies the experiment's trials send, in the order it asks them (each item's versions
    together), built beforehand: the reference is a program that has its messages already."""
    versions = AgentVersion.objects.filter(pk__in=version_ids).select_related("agent")
    candidates = [replay.candidate(v) for v in sorted(versions, key=lambda v: v.agent.name)]
    items = accepted_items(Dataset.objects.get(name=name)).select_related("owner")
    bodies = []
    for item in items.order_by("item_id").iterator(chunk_size=1000):
        for candidate in candidates:
            request = replay.request_for(candidate, item)
            bodies.append(
                {
                    "model": request.model,
                    "messages": request.messages,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    **request.sampling,
                }
            )
    return bodies


async def _call(client: openai.AsyncOpenAI, body: dict[str, Any]) -> bool:
    """One streamed completion read as Parley's model client reads it (each `data:` line parsed
    as JSON, the text joined); whether it finished."""
    response = await client.post(
        "/chat/completions", cast_to=httpx.Response, body=body, stream=True
    )
    text, finished = [], False
    try:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices")
            if choices:
                text.append((choices[0].get("delta") or {}).get("content") or "")
                finished = finished or choices[0].get("finish_reason") is not None
    finally:
        await response.aclose()
    return finished and bool("".join(text))


async def _all(client: openai.AsyncOpenAI, bodies: list[dict[str, Any]]) -> list[bool]:
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(body: dict[str, Any]) -> bool:
        async with slots:
            return await _call(client, body)

    return await asyncio.gather(*(one(body) for body in bodies))


async def _direct(warm: list[dict[str, Any]], bodies: list[dict[str, Any]]) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=settings.LLM_BASE_URL, api_key="bench", max_retries=0)
    try:
        await _all(client, warm)
        started, cpu = time.perf_counter(), _cpu()
        finished = await _all(client, bodies)
        seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    finally:
        await client.close()
    return {"calls": len(bodies), "ok": sum(finished), "seconds": seconds, "cpu": cpu}


def measure_direct(args: argparse.Namespace) -> dict[str, Any]:
    """The experiment's model calls made directly with `openai` at concurrency 20, nothing
    stored; after the warm-up experiment's calls."""
    warm = _requests(WARM_NAME, args.versions)
    bodies = _requests(args.name, args.versions)
    return asyncio.run(_direct(warm, bodies))
