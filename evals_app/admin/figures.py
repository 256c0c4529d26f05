"""The report as the experiment's page shows it: tables, charts and the items a candidate did
worse on, read from `build_report(experiment)` in one place. Versions are named from the
database ("Agent v3 (draft)")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse

from datasets_app.services.snapshot import up_to_last_question
from evals_app import money
from evals_app.models import Experiment, Trial
from evals_app.report import (
    Report,
    ScoreFigures,
    ScorerInfo,
    VersionFigures,
    WorseItem,
    build_report,
)
from sessions_app.admin import display
from sessions_app.models import AgentVersion

EMPTY = display.EMPTY
WORSE_SHOWN = 50  # the items a candidate did worse on, listed on the page (the downloads hold all)


def number(value: Any, signed: bool = False) -> str:
    if not isinstance(value, int | float):
        return EMPTY
    return f"{value:+.3g}" if signed else f"{value:.3g}"


def interval(low: Any, high: Any, signed: bool = False) -> str:
    if low is None or high is None:
        return ""
    return f"[{number(low, signed)}, {number(high, signed)}]"


def _against_baseline(f: ScoreFigures | None) -> dict[str, str]:
    if f is None or f.difference is None:
        return {"difference": EMPTY, "difference_interval": "", "wtl": EMPTY, "verdict": ""}
    if f.within_noise is None:
        verdict = ""
    elif f.within_noise:
        verdict = "within noise"
    else:
        verdict = "better" if f.difference > 0 else "worse"
    counts = (f.wins, f.ties, f.losses)
    return {
        "difference": number(f.difference, signed=True),
        "difference_interval": interval(f.difference_low, f.difference_high, signed=True),
        "wtl": " / ".join(EMPTY if c is None else str(c) for c in counts),
        "verdict": verdict,
    }


@dataclass
class ScorerTable:
    key: str
    label: str
    rows: list[dict[str, Any]]
    chart: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


@dataclass
class Figures:
    versions: list[dict[str, Any]]
    scorers: list[ScorerTable]
    worse: list[dict[str, Any]] = field(default_factory=list)

    @property
    def charts(self) -> dict[str, Any]:
        return {table.key: table.chart for table in self.scorers}


def _scorer_table(
    report: Report, info: ScorerInfo, versions: list[AgentVersion], baseline_id: Any
) -> ScorerTable:
    rows, means, intervals = [], [], []
    for version in versions:
        f = report.figures(version.pk, info.key)
        rows.append({
            "version": str(version),
            "baseline": version.pk == baseline_id,
            "n": f.n if f else EMPTY,
            "mean": number(f.mean if f else None),
            "interval": interval(f.low, f.high) if f else "",
            "errors": f.errors if f else EMPTY,
            **_against_baseline(f),
        })  # fmt: skip
        means.append(f.mean if f else None)
        ranged = f is not None and f.low is not None and f.high is not None
        intervals.append([f.low, f.high] if ranged else None)
    chart = {
        "title": info.label,
        "scale": list(info.scale),
        "labels": [str(v) for v in versions],
        "means": means,
        "intervals": intervals,
    }
    return ScorerTable(info.key, info.label, rows, chart)


def _version_row(version: AgentVersion, f: VersionFigures | None, baseline_id: Any) -> dict:
    def shown(name: str, unit: str = "count") -> str:
        return display.shown(getattr(f, name) if f else None, unit)

    return {
        "version": str(version),
        "baseline": version.pk == baseline_id,
        # Received of planned: a trial is planned before its answer is asked for.
        "answers": f"{shown('completed')} of {shown('trials')}" if f else EMPTY,
        "errors": shown("errors"),
        "tokens": shown("tokens", unit="tokens"),
        "cost": money.usd(f.cost if f else None),
        "cost_title": money.UNKNOWN_WHY if f is None or f.cost is None else "",
        "latency_p50": shown("duration_p50", unit="seconds"),
        "latency_p95": shown("duration_p95", unit="seconds"),
        "first_token_p50": shown("ttft_p50", unit="seconds"),
        "first_token_p95": shown("ttft_p95", unit="seconds"),
    }


def versions_of(experiment: Experiment) -> list[AgentVersion]:
    """The baseline first, then the candidates by agent and number."""
    versions = experiment.versions.select_related("agent").order_by("agent__name", "number")
    return sorted(versions, key=lambda v: v.pk != experiment.baseline_id)


def figures(experiment: Experiment, *, shows_items: bool) -> Figures:
    """`shows_items`: whether the reader may see the items' words (else an item is its id, and
    no side-by-side link is offered)."""
    report = build_report(experiment)
    versions = versions_of(experiment)
    base = experiment.baseline_id
    per_version = {v.version_id: v for v in report.versions}
    tables = [_scorer_table(report, info, versions, base) for info in report.scorers]
    for table in tables:
        table.warnings = report.judge_warnings(table.key)
    labels = {info.key: info.label for info in report.scorers}
    return Figures(
        versions=[_version_row(v, per_version.get(v.pk), base) for v in versions],
        scorers=tables,
        worse=worse_items(experiment, report.worse_items, shows_items, labels),
    )


def worse_items(
    experiment: Experiment,
    entries: list[WorseItem],
    shows_items: bool,
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The first WORSE_SHOWN entries, each opening its candidate's first repeat side by side
    (the view steps through the others)."""
    entries = entries[:WORSE_SHOWN]
    trials = Trial.objects.filter(
        experiment=experiment, item_uuid__in={e.item_uuid for e in entries}, repeat=1
    ).select_related("item", "version__agent")
    by_key = {(t.item_uuid, t.version_id): t for t in trials}
    shown = []
    for entry in entries:
        trial = by_key.get((entry.item_uuid, entry.version_id))
        if trial is None:
            continue
        url = reverse("admin:evals_app_experiment_compare", args=[experiment.pk, trial.pk])
        shown.append({
            "item": _item_name(trial, shows_items),
            "item_id": str(trial.item_uuid),
            "version": str(trial.version),
            "scorer": (labels or {}).get(entry.scorer, entry.scorer),
            "scorer_key": entry.scorer,
            "baseline": number(entry.baseline),
            "candidate": number(entry.candidate),
            "difference": number(entry.difference, signed=True),
            "url": url if shows_items else "",
        })  # fmt: skip
    return shown


def _item_name(trial: Trial, shows_items: bool) -> str:
    """The question the trial answered: the item's last user turn (its first may be an
    earlier turn of a long conversation)."""
    if trial.item is None:
        return "(item deleted)"
    if not shows_items:
        return f"item {trial.item_uuid}"
    asked = up_to_last_question(trial.item.messages)
    question = str(asked[-1].get("content") or "") if asked else ""
    return display.excerpt(question, 80) or f"item {trial.item_uuid}"
