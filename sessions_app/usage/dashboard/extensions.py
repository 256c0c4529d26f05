"""What other apps add to the dashboard without this app naming them: tiles and charts of their
own, for the range and filters the page shows, to the staff each part allows. Filled as those
apps load (their admin modules, at start-up); read on every view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

from sessions_app.usage.dashboard.scope import Scope
from sessions_app.usage.dashboard.tiles import Tile

# A chart as the page draws it: {labels, unit, datasets: [{key, label, data}]}, and "type":
# "line" for lines (bars, stacked, otherwise).
Chart = dict[str, Any]


@dataclass(frozen=True)
class ExtraChart:
    key: str
    title: str
    chart: Chart
    note: str = ""  # what it shows and how, under its title


@dataclass
class Figures:
    tiles: list[Tile] = field(default_factory=list)
    charts: list[ExtraChart] = field(default_factory=list)


@dataclass(frozen=True)
class Part:
    """Another app's figures for a scope (its tiles and charts), shown to the requests
    `allowed` lets in, on top of the dashboard's own rule."""

    allowed: Callable[[HttpRequest], bool]
    figures: Callable[[Scope], Figures]


_parts: list[Part] = []


def add_part(part: Part) -> None:
    """Adding the same part twice adds it once."""
    if part not in _parts:
        _parts.append(part)


def extras(request: HttpRequest, scope: Scope) -> Figures:
    """The tiles and charts of the parts this request may see."""
    shown = Figures()
    for part in _parts:
        if part.allowed(request):
            figures = part.figures(scope)
            shown.tiles += figures.tiles
            shown.charts += figures.charts
    return shown
