"""What people have used of each limit this period, summed where it is kept.

Tokens and cost are every model call made for them (their chats, and their sessions' titles
and summaries: sessions_app's LLMCall, which outlives deleted conversations) and, for staff,
the answers and judging of the experiments they started. Runs are the runs they started at a
door (chat page, REST API, OpenAI API), deleted ones included; imported runs and an OpenAI
client's history are not. A run's tokens count once its model calls end: a run in flight
counts for runs at once, for tokens and cost when it ends.

Each person's own limits are summed for everyone a batch names at once (a grouped query per
table); a shared budget's pool, per pool.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from budgets_app import periods
from budgets_app.models import Measure
from budgets_app.rules import Limit, Pool
from evals_app.models import Score, Trial
from sessions_app.models import DeletedRun, LLMCall, Run, RunSource, User

NOT_STARTED_HERE = (RunSource.IMPORT, RunSource.HISTORY)
_AMOUNT = {Measure.TOKENS: "total_tokens", Measure.COST: "cost"}
_JUDGE_AMOUNT = {Measure.TOKENS: "judge_tokens", Measure.COST: "judge_cost"}
# What a limit counts, whoever's it is: its measure, period and agent (None: every agent).
Shape = tuple[str, str, Any]


def shape(limit: Limit) -> Shape:
    return (limit.measure, limit.period, limit.agent_id)


def used(
    limits: Iterable[Limit], now: datetime, staff: Collection[Any] | None = None
) -> dict[Limit, Decimal]:
    """Each limit's use in the period holding `now`. `staff`: which of the people the limits
    name are staff, when the caller knows (else it is read)."""
    limits = list(limits)
    personal = [limit for limit in limits if not limit.shared]
    found = _personal(personal, now, staff) if personal else {}
    by_pool: dict[Pool, list[Limit]] = defaultdict(list)
    for limit in limits:
        if limit.shared:
            by_pool[limit.pool].append(limit)
    for pool, pooled in by_pool.items():
        amounts = [limit for limit in pooled if limit.measure != Measure.RUNS]
        runs = [limit for limit in pooled if limit.measure == Measure.RUNS]
        found.update(_amounts(pool, amounts, now, evaluations=True) if amounts else {})
        found.update(_runs(pool, runs, now) if runs else {})
    return found


def _personal(
    limits: list[Limit], now: datetime, staff: Collection[Any] | None
) -> dict[Limit, Decimal]:
    """Every person's own limits: one grouped query per table for them all; experiments
    (staff only) per person."""
    people = sorted({limit.pool[1] for limit in limits})
    totals = by_people(limits, people, now)
    found = {limit: totals.get((limit.pool[1], shape(limit)), Decimal(0)) for limit in limits}
    evaluators = _evaluators(people, staff)
    for person in evaluators:
        theirs = [lim for lim in limits if lim.pool[1] == person and lim.measure != Measure.RUNS]
        for limit, amount in _evaluated(("user", person), theirs, now).items():
            found[limit] += amount
    return found


def by_people(
    limits: Iterable[Limit], people: Any, now: datetime
) -> dict[tuple[Any, Shape], Decimal]:
    """Each person's use of each limit's shape, for the people `people` names (keys, or a
    query of them): chats, titles and summaries; runs started. Experiments are left out."""
    shapes = sorted({shape(limit) for limit in limits}, key=str)
    amounts = [s for s in shapes if s[0] != Measure.RUNS]
    runs = [s for s in shapes if s[0] == Measure.RUNS]
    found: dict[tuple[Any, Shape], Decimal] = defaultdict(Decimal)
    tables: list[tuple[QuerySet[Any], list[Shape], str, bool]] = [
        (LLMCall.objects.all(), amounts, "agent", False),
        (Run.objects.exclude(source__in=NOT_STARTED_HERE), runs, "agent", True),
        (DeletedRun.objects.exclude(source__in=NOT_STARTED_HERE), runs, "agent_id", True),
    ]
    for rows, wanted, agent, counted in tables:
        if not wanted:
            continue
        sums = {
            f"s{i}": Count("pk", filter=_window(s, now, "created_at", agent))
            if counted
            else Sum(_AMOUNT[s[0]], filter=_window(s, now, "created_at", agent))
            for i, s in enumerate(wanted)
        }
        since = min(periods.start(s[1], now) for s in wanted)
        grouped = (
            rows.order_by()
            .filter(user__in=people, created_at__gte=since)
            .values("user")
            .annotate(**sums)
        )
        for row in grouped:
            for i, s in enumerate(wanted):
                found[(row["user"], s)] += Decimal(row[f"s{i}"] or 0)
    return found


def _amounts(
    pool: Pool, limits: list[Limit], now: datetime, evaluations: bool
) -> dict[Limit, Decimal]:
    calls = LLMCall.objects.filter(**_whose("user", pool))
    totals = _summed(calls, limits, now, "created_at", "agent", _AMOUNT)
    if evaluations:
        for limit, amount in _evaluated(pool, limits, now).items():
            totals[limit] += amount
    return totals


def _evaluated(pool: Pool, limits: list[Limit], now: datetime) -> dict[Limit, Decimal]:
    """What the experiments the pool's people started used: answers, and their judging."""
    totals: dict[Limit, Decimal] = defaultdict(Decimal)
    if not limits:
        return totals
    trials = Trial.objects.filter(**_whose("experiment__created_by", pool))
    judged = Score.objects.filter(**_whose("trial__experiment__created_by", pool))
    for more in (
        _summed(trials, limits, now, "finished_at", "version__agent", _AMOUNT),
        _summed(judged, limits, now, "created_at", "judge_version__agent", _JUDGE_AMOUNT),
    ):
        for limit, amount in more.items():
            totals[limit] += amount
    return totals


def _runs(pool: Pool, limits: list[Limit], now: datetime) -> dict[Limit, Decimal]:
    started = Run.objects.exclude(source__in=NOT_STARTED_HERE)
    deleted = DeletedRun.objects.exclude(source__in=NOT_STARTED_HERE)
    totals: dict[Limit, Decimal] = defaultdict(Decimal)
    for rows, agent in ((started, "agent"), (deleted, "agent_id")):
        counts = {
            f"l{i}": Count("pk", filter=_window(shape(limit), now, "created_at", agent))
            for i, limit in enumerate(limits)
        }
        since = _earliest(limits, now)
        row = rows.order_by().filter(**_whose("user", pool), created_at__gte=since)
        counted = row.aggregate(**counts)
        for i, limit in enumerate(limits):
            totals[limit] += counted[f"l{i}"]
    return totals


def _summed(
    rows: QuerySet[Any],
    limits: list[Limit],
    now: datetime,
    when: str,
    agent: str,
    fields: dict[str, str],
) -> dict[Limit, Decimal]:
    """One query: each limit's sum of its measure's field over its period and agent."""
    sums = {
        f"l{i}": Sum(fields[limit.measure], filter=_window(shape(limit), now, when, agent))
        for i, limit in enumerate(limits)
    }
    row = rows.order_by().filter(**{f"{when}__gte": _earliest(limits, now)}).aggregate(**sums)
    return {limit: Decimal(row[f"l{i}"] or 0) for i, limit in enumerate(limits)}


def _window(counted: Shape, now: datetime, when: str, agent: str) -> Q:
    _, period, agent_id = counted
    window = Q(**{f"{when}__gte": periods.start(period, now)})
    return window & Q(**{agent: agent_id}) if agent_id else window


def _earliest(limits: list[Limit], now: datetime) -> datetime:
    return min(periods.start(limit.period, now) for limit in limits)


def _whose(field: str, pool: Pool) -> dict[str, Any]:
    kind, key = pool
    if kind == "user":
        return {f"{field}_id": key}
    if kind == "group":
        return {f"{field}__groups": key}
    return {}


def _evaluators(people: list[Any], staff: Collection[Any] | None) -> list[Any]:
    """Only staff start experiments: which of the people are."""
    if staff is not None:
        return [person for person in people if person in staff]
    return list(User.objects.filter(pk__in=people, is_staff=True).values_list("pk", flat=True))


def used_up(limit: Limit, people: QuerySet[Any], now: datetime) -> tuple[set[Any], Decimal]:
    """Who of `people` has used up a limit of each person's (everyone, for a limit of 0), and
    the most any of them used (experiments left out)."""
    used = {
        person: amount
        for (person, _), amount in by_people([limit], people.values("pk"), now).items()
    }
    out = {pk for pk, amount in used.items() if amount >= limit.amount}
    if limit.amount <= 0:
        out |= set(people.values_list("pk", flat=True))
    return out, max(used.values(), default=Decimal(0))
