"""Live evaluation: each agent's rules score a sample of its completed runs, and every run rated
down when a rule asks, in the background of the process that served the answer.

The chat app's signals bring the runs (`run_finished` once ends are stored, `run_rated` once
ratings are); the receivers only hand run ids to this process's `scoring`, which scores them on
the engine's loop, a few runs at a time (PARLEY_EVAL_LIVE_CONCURRENCY), never in an answer's
path. A scorer's failure is stored as that score's error; nothing here raises into the chat.

Whether a completed run is in a rule's sample depends on its id alone (`sampled`): every
process, before and after a restart, draws the same sample, and a rule's sample at 20 % holds
its sample at 10 %.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import time
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import QuerySet
from django.db.models.signals import post_delete, post_save

from evals_app.models import EvalRule
from evals_app.scoring import score_run
from sessions_app.engine import lifespan
from sessions_app.models import Run, RunStatus
from sessions_app.signals import run_finished, run_rated

log = logging.getLogger("parley.evals")

# Runs waiting to be scored in one process, at most: past it, a burst is left unscored (and
# said so in the log) rather than held in memory without end.
QUEUE_LIMIT = 10_000
# Seconds the active rules, as a process read them, stand for those of the database: a rule
# saved in another process applies there within this time (in this one, at once).
RULES_FRESH = 30.0


def sampled(run_id: Any, percent: int) -> bool:
    """Whether the run is in a sample of `percent` %: a hash of its id, the same in every
    process (Python's own hash() of a string changes from one process to the next)."""
    digest = hashlib.sha256(str(run_id).encode()).digest()
    return int.from_bytes(digest[:4], "big") % 100 < percent


@dataclass(frozen=True)
class Ended:
    """Runs to look at: completed ones (each rule scores its sample), or ones rated down (each
    rule with `rated_down` scores them all)."""

    run_ids: tuple[Any, ...]
    rated_down: bool = False


@dataclass(frozen=True)
class Due:
    """One run, and the rules that score it."""

    run_id: Any
    rules: tuple[EvalRule, ...]


class ActiveRules:
    """The active rules as this process last read them, so that the end of a run costs no query
    while no rule is active. Read again when RULES_FRESH seconds old, when a rule was saved or
    deleted here, and on another event loop than the last (a server started again)."""

    def __init__(self) -> None:
        self.read: list[EvalRule] | None = None
        self.at = 0.0
        self.loop: asyncio.AbstractEventLoop | None = None

    def fresh(self, loop: asyncio.AbstractEventLoop) -> bool:
        return (
            self.read is not None and self.loop is loop and time.monotonic() - self.at < RULES_FRESH
        )

    def none(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Known to be none, without a query."""
        return self.fresh(loop) and not self.read

    def active(self, loop: asyncio.AbstractEventLoop) -> list[EvalRule]:
        """In the ORM's thread."""
        if self.read is None or not self.fresh(loop):
            self.read = list(EvalRule.objects.filter(active=True).select_related("judge"))
            self.at, self.loop = time.monotonic(), loop
        return self.read

    def forget(self, **kwargs: object) -> None:
        """Receiver of EvalRule's post_save and post_delete."""
        self.read = None


rules = ActiveRules()


class LiveScoring:
    """This process's runs to score, worked through on the engine's loop by a few tasks."""

    def __init__(self) -> None:
        self.waiting: deque[Ended | Due] = deque()
        self.workers: set[asyncio.Task[None]] = set()

    def add(self, ended: Ended) -> None:
        """On the engine's loop."""
        if len(self.waiting) >= QUEUE_LIMIT:
            log.warning("%d run(s) left unscored: too many waiting", len(ended.run_ids))
            return
        self.waiting.append(ended)
        self._staff()

    async def stopping(self) -> None:
        """The engine stops: what waits is not scored (scoring after the answer never holds a
        server back from stopping), and the log says how much."""
        left = sum(len(j.run_ids) if isinstance(j, Ended) else 1 for j in self.waiting)
        self.waiting.clear()
        for task in self.workers:
            task.cancel()
        if left:
            log.warning("%d run(s) left unscored: the server stopped first", left)

    async def drain(self) -> None:
        """Until every run waiting is scored (tests use it)."""
        while working := [t for t in self.workers if not t.done()]:
            await asyncio.gather(*working, return_exceptions=True)

    def _staff(self) -> None:
        """Workers for what waits, up to the bound. Those that have returned (their discard
        still to come) and a stopped loop's are gone."""
        loop = asyncio.get_running_loop()
        for task in [t for t in self.workers if t.done() or t.get_loop() is not loop]:
            self.workers.discard(task)
        wanted = min(len(self.waiting), settings.PARLEY_EVAL_LIVE_CONCURRENCY)
        while len(self.workers) < wanted:
            # A fresh context: the task outlives whatever request or signal started it.
            task = loop.create_task(
                self._work(), name="live-scoring", context=contextvars.Context()
            )
            self.workers.add(task)
            task.add_done_callback(self.workers.discard)

    async def _work(self) -> None:
        while self.waiting:
            job = self.waiting.popleft()
            try:
                if isinstance(job, Ended):
                    loop = asyncio.get_running_loop()
                    self.waiting.extend(await sync_to_async(due)(job, loop))
                    self._staff()
                else:
                    await _score(job)
            except Exception:
                log.exception("live scoring failed")


scoring = LiveScoring()


def due(ended: Ended, loop: asyncio.AbstractEventLoop) -> list[Due]:
    """Which of the runs each active rule of their agent scores (completed runs only); in the
    ORM's thread, for the engine's `loop`."""
    active = rules.active(loop)
    if ended.rated_down:
        active = [rule for rule in active if rule.rated_down]
    if not active:
        return []
    by_agent: dict[Any, list[EvalRule]] = defaultdict(list)
    for rule in active:
        by_agent[rule.agent_id].append(rule)
    runs = Run.objects.filter(
        pk__in=ended.run_ids, status=RunStatus.COMPLETED, agent_id__in=by_agent
    ).values_list("pk", "agent_id")
    found = []
    for run_id, agent_id in runs:
        chosen = tuple(
            rule
            for rule in by_agent[agent_id]
            if ended.rated_down or sampled(run_id, rule.sample_percent)
        )
        if chosen:
            found.append(Due(run_id, chosen))
    return found


async def _score(job: Due) -> None:
    run = await Run.objects.filter(pk=job.run_id).afirst()
    if run is None:  # deleted meanwhile
        return
    for rule in job.rules:
        await score_run(run, rule.scorers, rule.judge)


# -- the chat app's signals --------------------------------------------------------------------


async def on_run_finished(
    sender: object, runs: QuerySet[Run], statuses: Mapping[Any, str], **kwargs: object
) -> None:
    """Receiver of `run_finished`, on the engine's loop: the completed runs wait their turn,
    unless no rule is active."""
    completed = tuple(pk for pk, status in statuses.items() if status == RunStatus.COMPLETED)
    if not completed:
        return
    loop = asyncio.get_running_loop()
    if not rules.fresh(loop):
        await sync_to_async(rules.active)(loop)
    if not rules.none(loop):
        scoring.add(Ended(completed))


def on_run_rated(sender: object, runs: QuerySet[Run], rater: str, **kwargs: object) -> None:
    """Receiver of `run_rated`, in the thread that saved the ratings: the completed runs rated
    down, of agents with a rule for them, go to the engine's loop to be scored."""
    rating = "feedback_rating" if rater == "user" else "staff_rating"
    down = runs.filter(
        **{rating: -1},
        status=RunStatus.COMPLETED,
        agent__eval_rules__active=True,
        agent__eval_rules__rated_down=True,
    )
    run_ids = tuple(down.order_by().values_list("pk", flat=True).distinct())
    if run_ids and not lifespan.call_soon(scoring.add, Ended(run_ids, rated_down=True)):
        log.warning("%d run(s) rated down left unscored: no engine runs here", len(run_ids))


def connect() -> None:
    """Called once by the AppConfig's ready(); connecting again changes nothing."""
    run_finished.connect(on_run_finished, dispatch_uid="evals_app.live.finished")
    run_rated.connect(on_run_rated, dispatch_uid="evals_app.live.rated")
    post_save.connect(rules.forget, sender=EvalRule, dispatch_uid="evals_app.live.saved")
    post_delete.connect(rules.forget, sender=EvalRule, dispatch_uid="evals_app.live.deleted")
    lifespan.on_stop(scoring.stopping)
