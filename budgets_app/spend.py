"""What a pool of people has used of each limit this period, summed where it is kept.

Tokens and cost are every model call made for them (their chats, and their sessions' titles
and summaries: sessions_app's LLMCall, which outlives deleted conversations) and, for staff,
the answers and judging of the experiments they started. Runs are the runs they started at a
door (chat page, REST API, OpenAI API), deleted ones included; imported runs and an OpenAI
client's history are not. A run's tokens count once its model calls end: a run in flight
counts for runs at once, for tokens and cost when it ends.
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


def used(
    limits: Iterable[Limit], now: datetime, staff: Collection[Any] | None = None
) -> dict[Limit, Decimal]:
    """Each limit's use in the period holding `now`: a few queries per pool. `staff`: which of
    the people the pools name are staff, when the caller knows (else it is read)."""
    by_pool: dict[Pool, list[Limit]] = defaultdict(list)
    for limit in limits:
        by_pool[limit.pool].append(limit)
    found: dict[Limit, Decimal] = {}
    for pool, pooled in by_pool.items():
        amounts = [limit for limit in pooled if limit.measure != Measure.RUNS]
        runs = [limit for limit in pooled if limit.measure == Measure.RUNS]
        found.update(_amounts(pool, amounts, now, staff) if amounts else {})
        found.update(_runs(pool, runs, now) if runs else {})
    return found


def _amounts(
    pool: Pool, limits: list[Limit], now: datetime, staff: Collection[Any] | None
) -> dict[Limit, Decimal]:
    totals = _summed(_calls(pool), limits, now, "created_at", "agent", _AMOUNT)
    if _may_evaluate(pool, staff):
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
        rows = rows.filter(**_whose("user", pool))
        for limit, count in _counted(rows, limits, now, agent).items():
            totals[limit] += count
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
        f"l{i}": Sum(fields[limit.measure], filter=_within(limit, now, when, agent))
        for i, limit in enumerate(limits)
    }
    row = rows.order_by().filter(**{f"{when}__gte": _earliest(limits, now)}).aggregate(**sums)
    return {limit: Decimal(row[f"l{i}"] or 0) for i, limit in enumerate(limits)}


def _counted(
    rows: QuerySet[Any], limits: list[Limit], now: datetime, agent: str
) -> dict[Limit, int]:
    counts = {
        f"l{i}": Count("pk", filter=_within(limit, now, "created_at", agent))
        for i, limit in enumerate(limits)
    }
    row = rows.order_by().filter(created_at__gte=_earliest(limits, now)).aggregate(**counts)
    return {limit: row[f"l{i}"] for i, limit in enumerate(limits)}


def _within(limit: Limit, now: datetime, when: str, agent: str) -> Q:
    window = Q(**{f"{when}__gte": periods.start(limit.period, now)})
    return window & Q(**{agent: limit.agent_id}) if limit.agent_id else window


def _earliest(limits: list[Limit], now: datetime) -> datetime:
    return min(periods.start(limit.period, now) for limit in limits)


def _calls(pool: Pool) -> QuerySet[LLMCall]:
    return LLMCall.objects.filter(**_whose("user", pool))


def _whose(field: str, pool: Pool) -> dict[str, Any]:
    kind, key = pool
    if kind == "user":
        return {f"{field}_id": key}
    if kind == "group":
        return {f"{field}__groups": key}
    return {}


def _may_evaluate(pool: Pool, staff: Collection[Any] | None) -> bool:
    """Only staff start experiments: a person's pool looks at them only when staff."""
    kind, key = pool
    if kind != "user":
        return True
    if staff is not None:
        return key in staff
    return User.objects.filter(pk=key, is_staff=True).exists()


def by_person(limit: Limit, people: Any, now: datetime) -> dict[Any, Decimal]:
    """Each person's use of a per-person limit (their own pool), for the people `people` (a
    queryset of users) holds: one grouped query per table, not one per person. What staff
    spent on experiments is left out of this listing (the gate counts it)."""
    since = periods.start(limit.period, now)
    agent = {"agent": limit.agent_id} if limit.agent_id else {}
    totals: dict[Any, Decimal] = defaultdict(Decimal)
    if limit.measure == Measure.RUNS:
        tables: list[tuple[QuerySet[Any], str, Any]] = [
            (Run.objects.exclude(source__in=NOT_STARTED_HERE).filter(**agent), "user", Count),
            (DeletedRun.objects.exclude(source__in=NOT_STARTED_HERE), "user", Count),
        ]
        if limit.agent_id:
            tables[1] = (tables[1][0].filter(agent_id=limit.agent_id), "user", Count)
    else:
        tables = [(LLMCall.objects.filter(**agent), "user", Sum)]
    for rows, who, total in tables:
        counted = "pk" if total is Count else _AMOUNT[limit.measure]
        grouped = (
            rows.order_by()
            .filter(**{f"{who}__in": people, "created_at__gte": since})
            .values(who)
            .annotate(total=total(counted))
        )
        for row in grouped:
            totals[row[who]] += Decimal(row["total"] or 0)
    return totals


def used_up(limit: Limit, people: QuerySet[Any], now: datetime) -> tuple[set[Any], Decimal]:
    """Who of `people` has used up a per-person limit (everyone, for a limit of 0), and the
    most any of them used."""
    used = by_person(limit, people.values("pk"), now)
    out = {pk for pk, amount in used.items() if amount >= limit.amount}
    if limit.amount <= 0:
        out |= set(people.values_list("pk", flat=True))
    return out, max(used.values(), default=Decimal(0))
