"""The report as the experiment's page shows it: tables, charts and the items a candidate did
worse on, read from `build_report(experiment)` in one place.

What is read of `Report.to_dict()` (a figure the report lacks shows as a dash):
- "scorers": [{"key", "label", "scale": [low, high], "results": [{"version_id", "n", "mean",
  "low", "high", "errors", "vs_baseline": {"difference", "low", "high", "wins", "ties",
  "losses", "within_noise"} or null}]}]
- "versions": [{"version_id", "trials", "errors", "tokens", "cost", "latency": {"p50", "p95"},
  "first_token": {"p50", "p95"}}]
and of each of `Report.worse_items` (a dict or an object): "item_uuid", "version_id", "repeat",
"scorer", "baseline", "candidate", "difference", and "trial_id" when it names the candidate's
trial. Versions are named from the database ("Agent v3 (draft)"), whatever the report calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse

from evals_app.models import Experiment, Trial
from evals_app.report import build_report
from sessions_app.admin import display
from sessions_app.models import AgentVersion

EMPTY = display.EMPTY
WORSE_SHOWN = 50  # the items a candidate did worse on, listed on the page (the downloads hold all)


def get(data: Any, *path: str) -> Any:
    """data[path[0]][path[1]]…, or None where a key (or attribute) is missing."""
    for name in path:
        if isinstance(data, Mapping):
            data = data.get(name)
        else:
            data = getattr(data, name, None)
        if data is None:
            return None
    return data


def number(value: Any, signed: bool = False) -> str:
    if not isinstance(value, int | float):
        return EMPTY
    return f"{value:+.3g}" if signed else f"{value:.3g}"


def interval(low: Any, high: Any, signed: bool = False) -> str:
    if low is None or high is None:
        return ""
    return f"[{number(low, signed)}, {number(high, signed)}]"


def _against_baseline(vs: Any) -> dict[str, str]:
    if vs is None:
        return {"difference": EMPTY, "difference_interval": "", "wtl": EMPTY, "verdict": ""}
    counts = [get(vs, k) for k in ("wins", "ties", "losses")]
    noise = get(vs, "within_noise")
    difference = get(vs, "difference")
    if noise is None or not isinstance(difference, int | float):
        verdict = ""
    elif noise:
        verdict = "within noise"
    else:
        verdict = "better" if difference > 0 else "worse"
    return {
        "difference": number(difference, signed=True),
        "difference_interval": interval(get(vs, "low"), get(vs, "high"), signed=True),
        "wtl": " / ".join(EMPTY if c is None else str(c) for c in counts),
        "verdict": verdict,
    }


@dataclass
class ScorerTable:
    key: str
    label: str
    rows: list[dict[str, Any]]
    chart: dict[str, Any]


@dataclass
class Figures:
    versions: list[dict[str, Any]]
    scorers: list[ScorerTable]
    worse: list[dict[str, Any]] = field(default_factory=list)

    @property
    def charts(self) -> dict[str, Any]:
        return {table.key: table.chart for table in self.scorers}


def _scorer_table(scorer: Any, versions: list[AgentVersion], baseline_id: Any) -> ScorerTable:
    results = {str(get(r, "version_id")): r for r in get(scorer, "results") or ()}
    rows, means, intervals = [], [], []
    for version in versions:
        result = results.get(str(version.pk), {})
        mean, low, high = get(result, "mean"), get(result, "low"), get(result, "high")
        rows.append({
            "version": str(version),
            "baseline": version.pk == baseline_id,
            "n": get(result, "n") if get(result, "n") is not None else EMPTY,
            "mean": number(mean),
            "interval": interval(low, high),
            "errors": get(result, "errors") if get(result, "errors") is not None else EMPTY,
            **_against_baseline(get(result, "vs_baseline")),
        })  # fmt: skip
        means.append(mean if isinstance(mean, int | float) else None)
        intervals.append([low, high] if low is not None and high is not None else None)
    key = str(get(scorer, "key") or "")
    label = str(get(scorer, "label") or key)
    chart = {
        "title": label,
        "scale": get(scorer, "scale"),
        "labels": [str(v) for v in versions],
        "means": means,
        "intervals": intervals,
    }
    return ScorerTable(key, label, rows, chart)


def _version_row(version: AgentVersion, figures: Any, baseline_id: Any) -> dict[str, Any]:
    def shown(*path: str, unit: str = "count") -> str:
        return display.shown(get(figures, *path), unit)

    return {
        "version": str(version),
        "baseline": version.pk == baseline_id,
        "trials": shown("trials"),
        "errors": shown("errors"),
        "tokens": shown("tokens", unit="tokens"),
        "cost": shown("cost", unit="usd"),
        "latency_p50": shown("latency", "p50", unit="seconds"),
        "latency_p95": shown("latency", "p95", unit="seconds"),
        "first_token_p50": shown("first_token", "p50", unit="seconds"),
        "first_token_p95": shown("first_token", "p95", unit="seconds"),
    }


def versions_of(experiment: Experiment) -> list[AgentVersion]:
    """The baseline first, then the candidates by agent and number."""
    versions = experiment.versions.select_related("agent").order_by("agent__name", "number")
    return sorted(versions, key=lambda v: v.pk != experiment.baseline_id)


def figures(experiment: Experiment) -> Figures:
    report = build_report(experiment)
    data = report.to_dict()
    versions = versions_of(experiment)
    base = experiment.baseline_id
    per_version = {str(get(v, "version_id")): v for v in get(data, "versions") or ()}
    return Figures(
        versions=[_version_row(v, per_version.get(str(v.pk), {}), base) for v in versions],
        scorers=[_scorer_table(s, versions, base) for s in get(data, "scorers") or ()],
        worse=worse_items(experiment, list(getattr(report, "worse_items", None) or ())),
    )


def worse_items(experiment: Experiment, entries: list[Any]) -> list[dict[str, Any]]:
    """The first WORSE_SHOWN entries, each with its candidate's trial to open side by side."""
    entries = entries[:WORSE_SHOWN]
    uuids = {str(get(e, "item_uuid")) for e in entries if get(e, "item_uuid")}
    trials = Trial.objects.filter(experiment=experiment, item_uuid__in=uuids)
    by_key = {
        (str(t.item_uuid), str(t.version_id), t.repeat): t
        for t in trials.select_related("item", "version__agent")
    }
    by_id = {str(t.pk): t for t in by_key.values()}
    shown = []
    for entry in entries:
        trial = by_id.get(str(get(entry, "trial_id"))) or by_key.get(
            (str(get(entry, "item_uuid")), str(get(entry, "version_id")), get(entry, "repeat") or 1)
        )
        if trial is None:
            continue
        shown.append({
            "item": display.excerpt(str(trial.item), 80) if trial.item else "(item deleted)",
            "version": str(trial.version),
            "repeat": trial.repeat,
            "scorer": get(entry, "scorer") or EMPTY,
            "baseline": number(get(entry, "baseline")),
            "candidate": number(get(entry, "candidate")),
            "difference": number(get(entry, "difference"), signed=True),
            "url": reverse("admin:evals_app_experiment_compare", args=[experiment.pk, trial.pk]),
        })  # fmt: skip
    return shown
