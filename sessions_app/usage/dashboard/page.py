"""The staff metrics dashboard at /admin/dashboard/: a thin view over usage.dashboard.

Wrapped in `admin.site.admin_view` in the URLconf, so only staff get past the admin's login.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from sessions_app.admin.display import change, shown
from sessions_app.models import Agent, LLMCall, Run, RunSource
from sessions_app.usage import dashboard
from sessions_app.usage.dashboard import columns, extensions
from sessions_app.usage.dashboard.form import DEFAULT_PRESET, PRESETS, DashboardForm

TEMPLATE = "sessions_app/admin/dashboard.html"
CHARTS = {
    "runs_by_status": "Runs per day, by status",
    "tokens_by_model": "Tokens per day, by model",
    "first_token": "Time to first token per day (chat calls)",
    "cost_per_day": "Estimated cost per day",
    "feedback_per_day": "Ratings per day",
}


def may_see_dashboard(request: HttpRequest) -> bool:
    """Its tables show what the run and model-call lists show; the same permissions open it."""
    return all(admin.site.get_model_admin(m).has_view_permission(request) for m in (Run, LLMCall))


def dashboard_view(request: HttpRequest) -> HttpResponse:
    if not may_see_dashboard(request):
        raise PermissionDenied
    form = DashboardForm(request.GET)
    context = _context(request, form)
    if not form.is_valid():
        return TemplateResponse(request, TEMPLATE, context, status=400)
    scope = form.scope(timezone.now())
    wanted = form.cleaned_data["csv"]
    if wanted:
        filename = f"parley-{wanted}-{scope.start:%Y%m%d}-{scope.end:%Y%m%d}.csv"
        return columns.csv_response(wanted, dashboard.table(scope, wanted), filename)
    board = dashboard.build(scope)
    extra = extensions.extras(request, scope)  # other apps' figures
    context.update(
        scope=scope,
        source=RunSource(scope.source).label if scope.source else "",
        tiles=[_tile(tile) for tile in [*board.tiles, *extra.tiles]],
        charts={**board.charts, **{chart.key: chart.chart for chart in extra.charts}},
        chart_titles=[
            *((key, title, "") for key, title in CHARTS.items()),
            *((chart.key, chart.title, chart.note) for chart in extra.charts),
        ],
        tables=[
            {**columns.rendered(name, rows, scope), "csv": _url(request, csv=name)}
            for name, rows in board.tables.items()
        ],
    )
    return TemplateResponse(request, TEMPLATE, context)


def _context(request: HttpRequest, form: DashboardForm) -> dict[str, Any]:
    custom = bool(request.GET.get("start") or request.GET.get("end"))
    chosen = None if custom else request.GET.get("range") or DEFAULT_PRESET
    return {
        **admin.site.each_context(request),
        "title": "Metrics dashboard",
        "form": form,
        "presets": [
            (label, _url(request, range=key, start=None, end=None), key == chosen)
            for key, (label, _) in PRESETS.items()
        ],
        "models": Agent.objects.order_by("model").values_list("model", flat=True).distinct(),
    }


def _tile(tile: dashboard.Tile) -> dict[str, Any]:
    percent = tile.change
    better = None if percent is None or percent == 0 else (percent < 0) == tile.lower_is_better
    parts = [(name, shown(value, tile.unit)) for name, value in tile.parts]
    if tile.basis is not None:
        parts.append(("of", f"{shown(tile.basis[1], 'count')} {tile.basis[0]}"))
    return {
        "key": tile.key,
        "label": tile.label,
        "value": shown(tile.value, tile.unit),
        "previous": shown(tile.previous, tile.unit),
        "change": change(percent, tile.previous, tile.value),
        "better": better,
        "hint": tile.hint,
        "parts": parts,
    }


def _url(request: HttpRequest, **changes: str | None) -> str:
    """This page's URL with some parameters changed (None: removed), filters kept."""
    params = {k: v for k, v in request.GET.items() if k != "csv" and v}
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return f"{request.path}?{urlencode(params)}"
