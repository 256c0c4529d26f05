"""An experiment's report: per version and scorer the mean with its 95 % bootstrap interval,
against the baseline the paired difference with its interval and wins, ties and losses, and per
version its cost, tokens, latency and errors (see docs/evaluation.md for the method).

Read in bounded memory: trials and scores as short value rows, streamed; no answer's text.
Every scorer here is read as "higher is better". The pairwise scorer has no baseline value: its
figure is the candidate's win rate, and its difference is that rate minus an even 0.5.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from django.db.models import Sum

from evals_app import stats
from evals_app.models import Experiment, Score, Trial, TrialStatus
from evals_app.report_render import as_csv, as_dict, as_text
from evals_app.scorer_labels import label_of, label_of_key
from evals_app.scorers import REGISTRY, SpecError, build
from sessions_app.models import Agent, AgentVersion

EVEN = 0.5  # the pairwise scorer's value for "as good as the baseline"
# Fewer paired items cannot tell two versions apart at 95 %: even when every item goes the same
# way, a sign test needs six (two-sided p = 2 / 2**6 < 0.05), while the bootstrap of identical
# differences would give an interval of no width.
MIN_PAIRED = 6
# A judge that gave this many answers of a version one and the same verdict may not be telling
# answers apart (a rubric it cannot apply, a scale it ignores); fewer may simply be alike.
MIN_JUDGED = 6
CHUNK = 2000


@dataclass
class ScorerInfo:
    key: str
    name: str
    label: str
    scale: tuple[float, float]
    pairwise: bool = False

    @property
    def span(self) -> float:
        """How far a difference can go, to rank differences across scales."""
        return EVEN if self.pairwise else self.scale[1] - self.scale[0]


@dataclass
class VersionFigures:
    version_id: Any
    label: str
    baseline: bool
    trials: int = 0  # the answers planned: every trial, those not asked yet too
    completed: int = 0  # the answers received
    errors: int = 0  # the answers that failed
    tokens: int = 0
    cost: Decimal | None = None
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    duration_p50: float | None = None
    duration_p95: float | None = None


@dataclass
class ScoreFigures:
    """One version on one scorer; the comparison fields are None for the baseline."""

    version_id: Any
    scorer: str
    n: int = 0
    items: int = 0
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    errors: int = 0
    difference: float | None = None
    difference_low: float | None = None
    difference_high: float | None = None
    wins: int | None = None
    ties: int | None = None
    losses: int | None = None
    # The one value every scored answer was given, when they were all given the same.
    same_value: float | None = None

    @property
    def paired_items(self) -> int:
        return (self.wins or 0) + (self.ties or 0) + (self.losses or 0)

    @property
    def within_noise(self) -> bool | None:
        if self.difference_low is None or self.difference_high is None:
            return None
        if self.paired_items < MIN_PAIRED:
            return True
        return self.difference_low <= 0.0 <= self.difference_high

    @property
    def worse(self) -> bool:
        """Worse than the baseline beyond noise: the whole interval below no difference."""
        return self.within_noise is False and self.difference_high < 0.0  # type: ignore[operator]


class WorseItem(NamedTuple):
    item_uuid: Any
    version_id: Any
    scorer: str
    difference: float
    baseline: float  # the item's mean over repeats (0.5 for the pairwise scorer)
    candidate: float


@dataclass
class Report:
    experiment: dict[str, Any]
    versions: list[VersionFigures]
    scorers: list[ScorerInfo]
    scores: list[ScoreFigures]
    worse_items: list[WorseItem] = field(default_factory=list)

    @property
    def baseline_id(self) -> Any:
        return next((v.version_id for v in self.versions if v.baseline), None)

    @property
    def regressed(self) -> bool:
        """A candidate worse than the baseline beyond noise on some scorer."""
        return any(f.worse for f in self.scores if f.version_id != self.baseline_id)

    def below(self, min_score: float) -> bool:
        """A candidate whose mean on some scorer is under `min_score`, on a scale of 0 to 1 (a
        judge's 1 to 5 read as 0, 0.25 … 1), so one threshold fits every scorer."""
        scales = {info.key: info.scale for info in self.scorers}
        return any(
            f.mean is not None and _share(f.mean, scales.get(f.scorer, (0.0, 1.0))) < min_score
            for f in self.candidates()
        )

    def candidates(self) -> list[ScoreFigures]:
        return [f for f in self.scores if f.version_id != self.baseline_id]

    def unvouched(self) -> list[str]:
        """Why the figures cannot vouch for the candidates: the experiment did not complete,
        or a candidate's answers or scores failed (a failed answer has no score, so its mean
        alone would look fine)."""
        reasons = []
        status = self.experiment.get("status")
        if status != "completed":
            reasons.append(f"the experiment ended {status}")
        labels = {v.version_id: v.label for v in self.versions}
        for v in self.versions:
            if not v.baseline and v.errors:
                reasons.append(f"{v.errors} answer(s) of {v.label} failed")
        names = {info.key: info.label for info in self.scorers}
        for f in self.candidates():
            if f.errors:
                scorer = names.get(f.scorer, f.scorer)
                reasons.append(f"{f.errors} {scorer} score(s) of {labels[f.version_id]} failed")
        return reasons

    def judge_warnings(self, key: str | None = None) -> list[str]:
        """Judges (of the scorer `key`, or every one) that gave every answer of a version the
        same verdict, over MIN_JUDGED answers or more: they may not tell answers apart, and
        their figures say little."""
        labels = {v.version_id: v.label for v in self.versions}
        warnings = []
        for info in self.scorers:
            judged = getattr(REGISTRY.get(info.name), "needs_judge", False)
            if not judged or key not in (None, info.key):
                continue
            for f in self.scores:
                if f.scorer == info.key and f.same_value is not None and f.n >= MIN_JUDGED:
                    warnings.append(
                        f"{info.label} gave all {f.n} scored answers of "
                        f"{labels.get(f.version_id, f.version_id)} the same score "
                        f"({f.same_value:g}): the judge may not be telling answers apart."
                    )
        return warnings

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)

    def to_csv(self) -> str:
        return as_csv(self)

    def to_text(self) -> str:
        return as_text(self)

    def figures(self, version_id: Any, key: str) -> ScoreFigures | None:
        return next(
            (f for f in self.scores if f.version_id == version_id and f.scorer == key), None
        )


def _share(value: float, scale: tuple[float, float]) -> float:
    low, high = scale
    return (value - low) / (high - low) if high > low else value


def build_report(experiment: Experiment) -> Report:
    versions = _versions(experiment)
    scorers = _scorers(experiment)
    values, errors = _score_values(experiment)
    for extra in sorted({key for key, _ in values} | {key for key, _ in errors}):
        if extra not in {s.key for s in scorers}:
            scorers.append(_info_of_key(extra))
    scores, worse = [], []
    for info in scorers:
        for version in versions:
            figures, worse_here = _figures(experiment, info, version, values, errors)
            scores.append(figures)
            worse += worse_here
    spans = {info.key: info.span or 1.0 for info in scorers}
    worse.sort(key=lambda w: (w.difference / spans[w.scorer], str(w.item_uuid)))
    return Report(_about(experiment, versions), versions, scorers, scores, worse)


def _versions(experiment: Experiment) -> list[VersionFigures]:
    rows = AgentVersion.objects.filter(experiments=experiment).select_related("agent")
    ordered = sorted(rows, key=lambda v: (v.pk != experiment.baseline_id, v.agent.name, v.number))
    by_id = {
        v.pk: VersionFigures(v.pk, f"{v.agent.name} {v.label}", v.pk == experiment.baseline_id)
        for v in ordered
    }
    _trial_figures(experiment, by_id)
    return list(by_id.values())


def _trial_figures(experiment: Experiment, by_id: dict[Any, VersionFigures]) -> None:
    latency: dict[Any, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    rows = (
        Trial.objects.filter(experiment=experiment)
        .order_by()
        .values_list(
            "version_id", "status", "total_tokens", "cost", "time_to_first_token", "duration"
        )
    )
    for version_id, status, tokens, cost, ttft, duration in rows.iterator(chunk_size=CHUNK):
        figures = by_id.get(version_id)
        if figures is None:
            continue
        figures.trials += 1
        figures.tokens += tokens or 0
        if cost is not None:
            figures.cost = (figures.cost or Decimal(0)) + cost
        if status == TrialStatus.ERROR:
            figures.errors += 1
        elif status == TrialStatus.COMPLETED:
            figures.completed += 1
            firsts, durations = latency[version_id]
            if ttft is not None:
                firsts.append(ttft)
            if duration is not None:
                durations.append(duration)
    for version_id, (firsts, durations) in latency.items():
        figures = by_id[version_id]
        figures.ttft_p50, figures.ttft_p95 = _p50_p95(firsts)
        figures.duration_p50, figures.duration_p95 = _p50_p95(durations)


def _p50_p95(values: list[float]) -> tuple[float | None, float | None]:
    return stats.percentile(values, 50), stats.percentile(values, 95)


Values = dict[tuple[str, Any], dict[Any, list[float]]]


def _score_values(experiment: Experiment) -> tuple[Values, dict[tuple[str, Any], int]]:
    """Per (scorer, version): each item's values over its repeats; and the count of errors."""
    values: Values = defaultdict(lambda: defaultdict(list))
    errors: dict[tuple[str, Any], int] = defaultdict(int)
    rows = Score.objects.filter(trial__experiment=experiment).values_list(
        "scorer", "trial__version_id", "trial__item_uuid", "value"
    )
    for key, version_id, item_uuid, value in rows.iterator(chunk_size=CHUNK):
        if value is None:
            errors[key, version_id] += 1
        else:
            values[key, version_id][item_uuid].append(value)
    # Items in one order whatever order the database gave them in, so the resampling (and
    # the intervals) depend on the seed alone.
    ordered = {k: dict(sorted(v.items(), key=lambda i: str(i[0]))) for k, v in values.items()}
    return ordered, errors


def _figures(
    experiment: Experiment,
    info: ScorerInfo,
    version: VersionFigures,
    values: Values,
    errors: dict[tuple[str, Any], int],
) -> tuple[ScoreFigures, list[WorseItem]]:
    mine = values.get((info.key, version.version_id), {})
    item_means = [stats.item_mean(v) for v in mine.values()]
    mean, low, high = stats.bootstrap_mean(item_means, experiment.seed)
    given = {value for repeats in mine.values() for value in repeats}
    figures = ScoreFigures(
        version.version_id,
        info.key,
        n=sum(len(v) for v in mine.values()),
        items=len(mine),
        mean=mean,
        low=low,
        high=high,
        errors=errors.get((info.key, version.version_id), 0),
        same_value=next(iter(given)) if len(given) == 1 else None,
    )
    if version.baseline:
        return figures, []
    # The pairwise scorer compares already: its baseline is an even 0.5 on every item.
    base = (
        dict.fromkeys(mine, EVEN)
        if info.pairwise
        else values.get((info.key, experiment.baseline_id), {})
    )
    (
        figures.difference,
        figures.difference_low,
        figures.difference_high,
        figures.wins,
        figures.ties,
        figures.losses,
    ) = stats.paired(base, mine, experiment.seed)
    worse = [
        WorseItem(
            item,
            version.version_id,
            info.key,
            difference,
            stats.item_mean(base[item]),
            stats.item_mean(mine[item]),
        )
        for item, difference in stats.differences_by_item(base, mine).items()
        if difference < 0
    ]
    return figures, worse


def _scorers(experiment: Experiment) -> list[ScorerInfo]:
    """The experiment's scorers as its specs name them (a spec that no longer builds is left
    to the keys its scores carry)."""
    infos: list[ScorerInfo] = []
    for spec in experiment.scorers or []:
        try:
            # Described only, never asked: any judge will do to build it.
            scorer = build(spec, judge=Agent(name="judge"))
        except SpecError:
            continue
        if scorer.key not in {i.key for i in infos}:
            infos.append(
                ScorerInfo(
                    scorer.key, scorer.name, label_of(spec), tuple(scorer.scale), scorer.pairwise
                )
            )
    return infos


def _info_of_key(key: str) -> ScorerInfo:
    """A scorer met only in scores (its spec changed or removed since): described by its name."""
    name = key.split(":", 1)[0]
    cls = REGISTRY.get(name)
    if cls is None:
        return ScorerInfo(key, name, name, (0.0, 1.0))
    return ScorerInfo(key, name, label_of_key(key), tuple(cls.scale), cls.pairwise)


def _about(experiment: Experiment, versions: list[VersionFigures]) -> dict[str, Any]:
    judged = Score.objects.filter(trial__experiment=experiment).aggregate(
        tokens=Sum("judge_tokens"), cost=Sum("judge_cost")
    )
    return {
        "experiment_id": experiment.pk,
        "name": str(experiment),
        "dataset": experiment.dataset.name,
        "split": experiment.split,
        "status": experiment.status,
        "repeats": experiment.repeats,
        "seed": experiment.seed,
        "baseline": next((v.label for v in versions if v.baseline), ""),
        "used_tokens": experiment.used_tokens,
        "used_cost": experiment.used_cost,
        "judge_tokens": judged["tokens"] or 0,
        "judge_cost": judged["cost"],
        "created_at": experiment.created_at,
        "finished_at": experiment.finished_at,
    }
