"""The benchmark's one output: a plain-text table of Parley against its references."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Row:
    figure: str
    measure: str
    unit: str
    parley: tuple[float, float | None]  # (median, p95) or (value, None)
    reference: str = ""  # which reference: direct, naive, small data
    ref: tuple[float, float | None] | None = None
    target: str = ""
    passed: bool | None = None  # None: no target for this row
    lower_is_better: bool = True

    @property
    def ratio(self) -> float | None:
        if self.ref is None or not self.ref[0] or math.isnan(self.ref[0]):
            return None
        return self.parley[0] / self.ref[0]


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "n/a"
    if unit == "ms":
        return f"{value * 1000:.1f}"
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _pair(pair: tuple[float, float | None] | None, unit: str) -> str:
    if pair is None:
        return ""
    first = _num(pair[0], unit)
    return first if pair[1] is None else f"{first} / {_num(pair[1], unit)}"


def render(rows: list[Row], notes: list[str] | None = None) -> str:
    header = ["#", "measure", "unit", "Parley p50 / p95", "reference", "ref p50 / p95", "ratio"]
    header += ["target", "result"]
    lines = [header]
    for row in rows:
        ratio = row.ratio
        verdict = "" if row.passed is None else ("pass" if row.passed else "MISS")
        lines.append(
            [
                row.figure,
                row.measure,
                row.unit,
                _pair(row.parley, row.unit),
                row.reference,
                _pair(row.ref, row.unit),
                "" if ratio is None else f"{ratio:.2f}",
                row.target,
                verdict,
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    right = {3, 5, 6}

    def fmt(line: list[str]) -> str:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(line)
        ]
        return "  ".join(cells).rstrip()

    out = [fmt(lines[0]), "  ".join("-" * w for w in widths)]
    out += [fmt(line) for line in lines[1:]]
    if notes:
        out += ["", *notes]
    return "\n".join(out)
