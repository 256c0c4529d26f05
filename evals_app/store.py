"""The trials of a running experiment as the runner reads and writes them: pending ones a chunk
at a time, answers a batch at a time (with what they spent), and the answers a scorer has not
scored yet. Sync functions: the runner calls them from the database's side."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connections, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from evals_app.models import Experiment, Score, Trial, TrialStatus
from evals_app.scorers import Scorer
from sessions_app.llm.usage import Usage
from sessions_app.models.conversations import TOKEN_FIELDS

Key = tuple[Any, Any, int]  # a trial's place in the order trials are asked: item, version, repeat


@dataclass
class Answer:
    """How one trial ended, to be written."""

    trial_id: Any
    status: str  # completed or error
    model: str
    sent: list[dict[str, Any]] | None
    content: str = ""
    error: str = ""
    usage: Usage | None = None
    time_to_first_token: float | None = None
    duration: float | None = None
    cost: Decimal | None = None
    unavailable: bool = False  # failed because the model endpoint was away, not refusing it

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens if self.usage is not None else 0


@dataclass
class Chunk:
    trials: list[Trial]
    cancel_requested: bool


def next_chunk(experiment_id: Any, after: Key | None, size: int) -> Chunk:
    """The next pending trials in order (each item's versions and repeats together, so pairs
    are answered close in time), marked running; and whether a cancel was asked for."""
    pending = Trial.objects.filter(experiment_id=experiment_id, status=TrialStatus.PENDING)
    if after is not None:
        item, version, repeat = after
        pending = pending.filter(
            Q(item_uuid__gt=item)
            | Q(item_uuid=item, version_id__gt=version)
            | Q(item_uuid=item, version_id=version, repeat__gt=repeat)
        )
    fields = ("trial_id", "item_uuid", "version_id", "repeat", "item__item_id")
    item_fields = ("item__messages", "item__source_session_id", "item__owner__username")
    rows = list(
        pending.select_related("item__owner")
        .only(*fields, *item_fields, "item__owner_id")
        .order_by("item_uuid", "version_id", "repeat")[:size]
    )
    if rows:
        Trial.objects.filter(pk__in=[t.pk for t in rows], status=TrialStatus.PENDING).update(
            status=TrialStatus.RUNNING, started_at=timezone.now()
        )
    cancel = Experiment.objects.filter(pk=experiment_id).values_list("cancel_requested", flat=True)
    return Chunk(rows, bool(cancel.first()))


def key_of(trial: Trial) -> Key:
    return (trial.item_uuid, trial.version_id, trial.repeat)


# What an answer writes on its trial: one statement, sent with each batch's rows (executemany),
# since building an UPDATE through the ORM for every answer cost more than the database took to
# run it (docs/performance.md, "SQL through the ORM").
ANSWER_FIELDS = (
    "status",
    "model",
    "content",
    "error",
    "sent_messages",
    *TOKEN_FIELDS,
    "usage_estimated",
    "time_to_first_token",
    "duration",
    "cost",
    "finished_at",
)


def write_answers(experiment_id: Any, answers: list[Answer]) -> tuple[int, Decimal]:
    """The answers in one transaction, with what they spent added to the experiment's; that
    spending. A trial already ended (another claimant's late write) is left as it is."""
    now = timezone.now()
    connection = connections[Trial.objects.db]
    with transaction.atomic():
        open_ids = set(
            Trial.objects.filter(
                pk__in=[a.trial_id for a in answers],
                status__in=[TrialStatus.PENDING, TrialStatus.RUNNING],
            ).values_list("pk", flat=True)
        )
        kept = [a for a in answers if a.trial_id in open_ids]
        if kept:
            rows = [_row(answer, now, connection) for answer in kept]
            with connection.cursor() as cursor:
                cursor.executemany(_update_sql(connection), rows)
        tokens = sum(answer.tokens for answer in kept)
        cost = sum((answer.cost or Decimal(0) for answer in kept), Decimal(0))
        spend(experiment_id, tokens, cost)
    return tokens, cost


def _update_sql(connection: Any) -> str:
    quote = connection.ops.quote_name
    columns = [Trial._meta.get_field(name).column for name in ANSWER_FIELDS]
    sets = ", ".join(f"{quote(column)} = %s" for column in columns)
    key = quote(Trial._meta.pk.column)
    return f"UPDATE {quote(Trial._meta.db_table)} SET {sets} WHERE {key} = %s"


def _row(answer: Answer, now: Any, connection: Any) -> list[Any]:
    usage = answer.usage or Usage()
    values = {
        "status": answer.status,
        "model": answer.model,
        "content": answer.content,
        "error": answer.error,
        "sent_messages": answer.sent,
        **{name: getattr(usage, name) for name in TOKEN_FIELDS},
        "usage_estimated": usage.estimated,
        "time_to_first_token": answer.time_to_first_token,
        "duration": answer.duration,
        "cost": answer.cost,
        "finished_at": now,
    }
    row = [
        Trial._meta.get_field(name).get_db_prep_save(values[name], connection)
        for name in ANSWER_FIELDS
    ]
    return [*row, Trial._meta.pk.get_db_prep_value(answer.trial_id, connection)]


def spend(experiment_id: Any, tokens: int, cost: Decimal) -> None:
    if tokens or cost:
        Experiment.objects.filter(pk=experiment_id).update(
            used_tokens=F("used_tokens") + tokens, used_cost=F("used_cost") + cost
        )


def unscored(experiment: Experiment, scorer: Scorer, after: Any, size: int) -> list[Any]:
    """The ids of answers the scorer has not scored yet, from `after` on. A pairwise scorer
    judges candidates against the baseline, so the baseline's own answers are not its to score.
    Ids alone: scoring reads each trial as it needs it, and reading whole trials, items and
    versions here as well was a quarter of the database work of an experiment."""
    done = Score.objects.filter(trial=OuterRef("pk"), scorer=scorer.key)
    trials = Trial.objects.filter(experiment=experiment, status=TrialStatus.COMPLETED)
    trials = trials.filter(~Exists(done))
    if scorer.pairwise:
        trials = trials.exclude(version_id=experiment.baseline_id)
    if after is not None:
        trials = trials.filter(pk__gt=after)
    return list(trials.order_by("pk").values_list("pk", flat=True)[:size])


def spending(experiment_id: Any) -> tuple[int, Decimal]:
    row = Experiment.objects.values_list("used_tokens", "used_cost").get(pk=experiment_id)
    return row[0], row[1]


def unanswered(experiment_id: Any) -> bool:
    """Whether trials are left to answer: pending, or taken by this run and never started."""
    left = Trial.objects.filter(
        experiment_id=experiment_id, status__in=[TrialStatus.PENDING, TrialStatus.RUNNING]
    )
    return left.exists()
