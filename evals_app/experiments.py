"""Experiments as staff make them: validated, with every trial written up front (pending), so a
runner in any process can take them from the database and a killed one resumes where it was.

Trials are written in batches from the items' ids alone, so 10,000 items cost the memory of a
batch, not of the dataset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Q

from datasets_app.models import Dataset, DatasetItem, ItemStatus, Split
from evals_app.models import Experiment, Score, Trial, TrialStatus
from evals_app.scorers import REGISTRY, SpecError, build, spec_key
from sessions_app.models import Agent, AgentVersion, User

TRIAL_BATCH = 1000
MAX_REPEATS = 5
MAX_CONCURRENCY = 100
# What the budget_cost column holds (12 digits, 6 after the point).
MAX_COST = Decimal("999999.999999")


class ExperimentError(ValueError):
    """An experiment that cannot be made (or rescored) as asked: each problem with the field it
    is about, so the API answers them all at once, as any other 422."""

    def __init__(self, problems: str | Sequence[tuple[str, str]]) -> None:
        if isinstance(problems, str):
            problems = [("", problems)]
        self.problems = list(problems)
        self.message = " ".join(message for _, message in self.problems)
        super().__init__(self.message)


def create_experiment(
    *,
    dataset: Dataset,
    versions: Iterable[AgentVersion],
    baseline: AgentVersion,
    repeats: int = 1,
    scorers: Iterable[dict[str, Any] | str] = (),
    judge: Agent | None = None,
    split: str = "",
    concurrency: int | None = None,
    budget_tokens: int | None = None,
    budget_cost: Decimal | float | str | None = None,
    name: str = "",
    created_by: User | None = None,
    seed: int = 0,
) -> Experiment:
    """The experiment with its pending trials: every accepted item (of `split`, when given) by
    every version by every repeat. Raises ExperimentError listing what is wrong."""
    versions = list(versions)
    cost = _decimal(budget_cost)
    problems = [
        *_version_problems(versions, baseline),
        *_number_problems(repeats, concurrency, budget_tokens, cost, name),
    ]
    specs, scorer_problems = scorer_specs(scorers, judge)
    problems += scorer_problems
    if split and split not in Split.values:
        problems.append(("split", f"Unknown split “{split}”; the splits are {_listed(Split)}."))
    elif not accepted_items(dataset, split).exists():
        where = f" in its {split} split" if split else ""
        problems.append(("dataset_id", f"The dataset “{dataset}” has no accepted item{where}."))
    if problems:
        raise ExperimentError(problems)
    with transaction.atomic():
        experiment = Experiment(
            name=name.strip(),
            dataset=dataset,
            split=split,
            baseline=baseline,
            repeats=repeats,
            scorers=specs,
            judge=judge,
            budget_tokens=budget_tokens,
            budget_cost=cost,
            created_by=created_by,
            seed=seed,
        )
        if concurrency is not None:
            experiment.concurrency = concurrency
        experiment.save(force_insert=True)
        experiment.versions.set(versions)
        _write_trials(experiment, versions, repeats)
    return experiment


def accepted_items(dataset: Dataset, split: str = "") -> Any:
    items = DatasetItem.objects.filter(dataset=dataset, status=ItemStatus.ACCEPTED)
    return items.filter(split=split) if split else items


def scorer_specs(
    scorers: Iterable[dict[str, Any] | str], judge: Agent | None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The specs as stored ({"name": …, options}), each built once to prove it works with this
    judge; and the problems of those that do not."""
    specs: list[dict[str, Any]] = []
    problems: list[tuple[str, str]] = []
    keys: set[str] = set()
    for given in scorers:
        spec = {"name": given} if isinstance(given, str) else given
        try:
            scorer = build(given, judge)
        except SpecError as exc:
            problems.append(("scorers", str(exc)))
            continue
        if scorer.key not in keys:
            keys.add(scorer.key)
            specs.append(dict(spec))
    return specs, problems


def _version_problems(
    versions: list[AgentVersion], baseline: AgentVersion
) -> Iterator[tuple[str, str]]:
    ids = [v.pk for v in versions]
    if len(set(ids)) != len(ids):
        yield "versions", "The same version is given twice."
    if len(set(ids)) < 2:
        yield "versions", "An experiment compares at least two versions."
    if baseline.pk not in ids:
        yield "baseline", "The baseline must be one of the versions compared."


def _number_problems(
    repeats: int,
    concurrency: int | None,
    budget_tokens: int | None,
    budget_cost: Decimal | None,
    name: str,
) -> Iterator[tuple[str, str]]:
    if not 1 <= repeats <= MAX_REPEATS:
        yield "repeats", f"Repeats go from 1 to {MAX_REPEATS}."
    if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
        yield "concurrency", f"Concurrency goes from 1 to {MAX_CONCURRENCY}."
    if budget_tokens is not None and budget_tokens < 0:
        yield "budget_tokens", "A token budget cannot be negative."
    if budget_cost is not None and not Decimal(0) <= budget_cost <= MAX_COST:
        yield "budget_cost", f"A cost budget goes from 0 to {MAX_COST}."
    if len(name.strip()) > Experiment._meta.get_field("name").max_length:
        yield "name", "The name is too long (200 characters at most)."


def _decimal(value: Decimal | float | str | None) -> Decimal | None:
    if value is None or isinstance(value, Decimal):
        return value
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        number = Decimal("NaN")
    if not number.is_finite():
        raise ExperimentError([("budget_cost", "The cost budget is not a number.")])
    return number.quantize(Decimal("0.000001"))


def _listed(choices: Any) -> str:
    return ", ".join(choices.values)


def _write_trials(experiment: Experiment, versions: list[AgentVersion], repeats: int) -> None:
    """One pending trial per item, version and repeat, written a batch at a time."""
    ids = accepted_items(experiment.dataset, experiment.split).order_by()
    batch: list[Trial] = []
    for item_id in ids.values_list("item_id", flat=True).iterator(chunk_size=TRIAL_BATCH):
        for repeat in range(1, repeats + 1):
            batch += [
                Trial(
                    experiment=experiment,
                    item_id=item_id,
                    item_uuid=item_id,
                    version=version,
                    repeat=repeat,
                )
                for version in versions
            ]
        if len(batch) >= TRIAL_BATCH:
            Trial.objects.bulk_create(batch, batch_size=TRIAL_BATCH)
            batch = []
    if batch:
        Trial.objects.bulk_create(batch, batch_size=TRIAL_BATCH)


def progress(experiment: Experiment) -> dict[str, Any]:
    """Where it stands, in counts only: its trials (`done` counts those answered and those that
    failed, `errors` the latter), its scores written of those its answers so far call for
    (`scores_done` of `scores_total`, and per scorer in `scoring`), and what it spent against
    its budget (`cost_known`: whether any price was known, else its cost is unknown, not 0)."""
    answered = Q(status=TrialStatus.COMPLETED)
    counts = Trial.objects.filter(experiment=experiment).aggregate(
        total=Count("pk"),
        done=Count("pk", filter=Q(status__in=[TrialStatus.COMPLETED, TrialStatus.ERROR])),
        errors=Count("pk", filter=Q(status=TrialStatus.ERROR)),
        answered=Count("pk", filter=answered),
        answered_by_candidates=Count("pk", filter=answered & ~Q(version_id=experiment.baseline_id)),
        priced=Count("pk", filter=Q(cost__isnull=False)),
    )
    fresh = Experiment.objects.only(
        "status", "used_tokens", "used_cost", "budget_tokens", "budget_cost", "scorers"
    ).get(pk=experiment.pk)
    scoring = _scoring(fresh, counts.pop("answered"), counts.pop("answered_by_candidates"))
    priced = counts.pop("priced") > 0 or fresh.used_cost != 0 or _judges_priced(experiment)
    return {
        "status": fresh.status,
        **counts,
        "scores_done": sum(s["done"] for s in scoring),
        "scores_total": sum(s["total"] for s in scoring),
        "scoring": scoring,
        "used_tokens": fresh.used_tokens,
        "used_cost": fresh.used_cost,
        "cost_known": priced,
        "budget_tokens": fresh.budget_tokens,
        "budget_cost": fresh.budget_cost,
    }


def _scoring(experiment: Experiment, answered: int, by_candidates: int) -> list[dict[str, Any]]:
    """Per scorer, the scores written and those called for: one per answer, or per candidate's
    answer for a scorer that compares with the baseline's. One grouped count."""
    wanted: dict[str, int] = {}
    for spec in experiment.scorers or []:
        name = spec if isinstance(spec, str) else spec.get("name")
        pairwise = getattr(REGISTRY.get(str(name)), "pairwise", False)
        wanted.setdefault(spec_key(spec), by_candidates if pairwise else answered)
    written = dict(
        Score.objects.filter(trial__experiment=experiment, scorer__in=list(wanted))
        .order_by()
        .values_list("scorer")
        .annotate(n=Count("pk"))
    )
    return [
        {"scorer": key, "done": min(written.get(key, 0), total), "total": total}
        for key, total in wanted.items()
    ]


def _judges_priced(experiment: Experiment) -> bool:
    return Score.objects.filter(trial__experiment=experiment, judge_cost__isnull=False).exists()
