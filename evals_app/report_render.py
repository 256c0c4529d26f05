"""A report as JSON-ready data, as CSV (one row per version and scorer) and as a table for a
terminal (what `manage.py evaluate` prints)."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

from evals_app.money import usd

if TYPE_CHECKING:
    from evals_app.report import Report, ScoreFigures, ScorerInfo, VersionFigures

CSV_COLUMNS = (
    "version_id",
    "version",
    "baseline",
    "scorer",
    "scorer_label",
    "n",
    "items",
    "mean",
    "low",
    "high",
    "errors",
    "difference",
    "difference_low",
    "difference_high",
    "wins",
    "ties",
    "losses",
    "within_noise",
    "trials",
    "completed",
    "trial_errors",
    "tokens",
    "cost",
    "ttft_p50",
    "ttft_p95",
    "duration_p50",
    "duration_p95",
)
WORSE_SHOWN = 10


def plain(value: Any) -> Any:
    """JSON's kinds: ids and times as text, money as a number."""
    if isinstance(value, dict):
        return {key: plain(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def as_dict(report: Report) -> dict[str, Any]:
    return plain(
        {
            "experiment": report.experiment,
            "regressed": report.regressed,
            "versions": [asdict(v) for v in report.versions],
            "scorers": [{**asdict(s), "scale": list(s.scale)} for s in report.scorers],
            "scores": [{**asdict(f), "within_noise": f.within_noise} for f in report.scores],
            "worse_items": [w._asdict() for w in report.worse_items],
            "warnings": report.judge_warnings(),
        }
    )


def as_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    scorers = {s.key: s for s in report.scorers}
    for version in report.versions:
        figures = [f for f in report.scores if f.version_id == version.version_id]
        for row in [_row(version, f, scorers[f.scorer]) for f in figures] or [_row(version)]:
            writer.writerow({k: _cell(v) for k, v in row.items()})
    return out.getvalue()


def _cell(value: Any) -> Any:
    """Empty for none; floats to 6 decimals, as no figure here is finer."""
    if value is None:
        return ""
    return round(value, 6) if isinstance(value, float) else plain(value)


def _row(
    version: VersionFigures, figures: ScoreFigures | None = None, info: ScorerInfo | None = None
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "version_id": version.version_id,
        "version": version.label,
        "baseline": version.baseline,
        "trials": version.trials,
        "completed": version.completed,
        "trial_errors": version.errors,
        "tokens": version.tokens,
        "cost": version.cost,
        "ttft_p50": version.ttft_p50,
        "ttft_p95": version.ttft_p95,
        "duration_p50": version.duration_p50,
        "duration_p95": version.duration_p95,
    }
    if figures is not None and info is not None:
        scored = asdict(figures)
        row |= {k: scored[k] for k in CSV_COLUMNS if k in scored and k != "version_id"}
        row |= {"scorer_label": info.label, "within_noise": figures.within_noise}
    return row


def as_text(report: Report) -> str:
    about = report.experiment
    split = f", split {about['split']}" if about["split"] else ""
    lines = [
        f"{about['name']}: dataset {about['dataset']}{split}, {about['repeats']} repeat(s), "
        f"{about['status']}",
        f"Baseline {about['baseline']}; 95 % bootstrap intervals over items (seed "
        f"{about['seed']}). Spent {about['used_tokens']} tokens, "
        f"cost {_money(about['used_cost'] if _priced(report) else None)}.",
        "",
        *_table(
            ("version", "answers", "errors", "tokens", "cost", "ttft p50/p95", "duration p50/p95"),
            [_version_cells(v) for v in report.versions],
        ),
    ]
    labels = {
        v.version_id: v.label + (" (baseline)" if v.baseline else "") for v in report.versions
    }
    for info in report.scorers:
        low, high = info.scale
        kind = "win rate against the baseline" if info.pairwise else f"scale {low:g} to {high:g}"
        lines += ["", f"{info.label} [{info.key}], {kind}"]
        rows = [_score_cells(f, labels) for f in report.scores if f.scorer == info.key]
        header = ("version", "n", "mean", "95 % interval", "errors", "vs baseline", "W/T/L", "")
        lines += _table(header, rows)
    warnings = [f"Warning: {warning}" for warning in report.judge_warnings()]
    lines += ["", *warnings] if warnings else []
    lines += ["", *_verdict_lines(report, labels)]
    return "\n".join(lines) + "\n"


def _priced(report: Report) -> bool:
    """Whether a price was known for anything it spent (else its cost is unknown, not 0)."""
    judged = report.experiment.get("judge_cost")
    return judged is not None or any(v.cost is not None for v in report.versions)


def _version_cells(v: VersionFigures) -> list[str]:
    return [
        v.label + (" (baseline)" if v.baseline else ""),
        answers(v),
        str(v.errors),
        str(v.tokens),
        _money(v.cost),
        f"{_seconds(v.ttft_p50)} / {_seconds(v.ttft_p95)}",
        f"{_seconds(v.duration_p50)} / {_seconds(v.duration_p95)}",
    ]


def answers(v: VersionFigures) -> str:
    """Those received of those planned: "0 of 20" until the first arrives."""
    return f"{v.completed} of {v.trials}"


def _score_cells(f: ScoreFigures, labels: dict[Any, str]) -> list[str]:
    versus, record, note = "", "", ""
    if f.difference is not None:
        versus = f"{f.difference:+.3f} {_interval(f.difference_low, f.difference_high, '+')}"
        record = f"{f.wins}/{f.ties}/{f.losses}"
        note = "within noise" if f.within_noise else ("WORSE" if f.worse else "better")
    return [
        labels.get(f.version_id, str(f.version_id)),  # the baseline's says so
        str(f.n),
        "-" if f.mean is None else f"{f.mean:.3f}",
        _interval(f.low, f.high),
        str(f.errors),
        versus,
        record,
        note,
    ]


def _verdict_lines(report: Report, labels: dict[Any, str]) -> list[str]:
    names = {s.key: s.label if s.key == s.name else f"{s.label} [{s.key}]" for s in report.scorers}
    worse = [f for f in report.scores if f.worse and f.version_id != report.baseline_id]
    lines = [f"Worse than the baseline: {labels[f.version_id]} on {names[f.scorer]}" for f in worse]
    if not worse:
        lines = ["No candidate is worse than the baseline beyond noise."]
    if report.worse_items:
        count = len(report.worse_items)
        shown = f"the first {WORSE_SHOWN}" if count > WORSE_SHOWN else "all"
        lines += ["", f"Items where a candidate did worse: {count}, worst first ({shown}):"]
        cells = [
            [str(w.item_uuid), labels.get(w.version_id, ""), w.scorer, f"{w.difference:+.3f}"]
            for w in report.worse_items[:WORSE_SHOWN]
        ]
        lines += _table(("item", "version", "scorer", "difference"), cells)
    return lines


def _table(header: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Any) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(header), line("-" * w for w in widths), *(line(r) for r in rows)]


def _interval(low: float | None, high: float | None, sign: str = "") -> str:
    if low is None or high is None:
        return ""
    return f"[{low:{sign}.3f}, {high:{sign}.3f}]"


def _money(value: Decimal | None) -> str:
    return usd(value)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"
