"""How the dashboard's tables read: their columns, the admin pages their cells link to, and
their CSV downloads."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.utils import quote
from django.http import HttpResponse
from django.urls import reverse

from sessions_app.admin.display import shown
from sessions_app.services.spreadsheet import safe_cell
from sessions_app.usage.dashboard.scope import Scope

Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[Row], Any]
    unit: str = "text"  # how it is shown: text, count, tokens, usd, seconds, time
    link: Callable[[Row, Scope], str | None] | None = None


def _key(name: str) -> Callable[[Row], Any]:
    return lambda row: row[name]


def _change(model: str, key: str) -> Callable[[Row, Scope], str | None]:
    def link(row: Row, scope: Scope) -> str | None:
        if not row[key]:
            return None
        return reverse(f"admin:sessions_app_{model}_change", args=[quote(row[key])])

    return link


def _model_runs(row: Row, scope: Scope) -> str:
    """The model's runs in the admin, over the dashboard's range (and of its source)."""
    query = {
        "model": row["model"],
        "created_at__gte": scope.start.isoformat(),
        "created_at__lt": scope.end.isoformat(),
    }
    if scope.source:
        query["source__exact"] = scope.source  # the runs admin's own source filter
    return f"{reverse('admin:sessions_app_run_changelist')}?{urlencode(query)}"


def _session(row: Row) -> str:
    return row["session__session_name"] or str(row["session_id"])


USER = Column("User", _key("user__username"), link=_change("user", "user_id"))
AGENT = Column(
    "Agent", lambda r: r["agent__name"] or "(deleted agent)", link=_change("agent", "agent_id")
)
MODEL = Column("Model", _key("model"), link=_model_runs)
USAGE = [
    Column("Runs", _key("runs"), "count"),
    Column("Errors", _key("errors"), "count"),
    Column("Tokens in", _key("input_tokens"), "tokens"),
    Column("Tokens out", _key("output_tokens"), "tokens"),
    Column("Cost", _key("cost"), "usd"),
]
RUN = [
    Column("Started", _key("created_at"), "time", link=_change("run", "run_id")),
    USER,
    AGENT,
    Column("Model", _key("model")),
    Column("Session", _session, link=_change("session", "session_id")),
]
TABLES: dict[str, tuple[str, list[Column]]] = {
    "top_users": ("Top users", [USER, *USAGE]),
    "top_agents": ("Top agents", [AGENT, *USAGE]),
    "top_models": ("Top models", [MODEL, *USAGE]),
    "slowest_runs": ("Slowest runs", [
        *RUN,
        Column("Duration", _key("duration"), "seconds"),
        Column("First token", _key("time_to_first_token"), "seconds"),
        Column("Status", _key("status")),
    ]),
    "latest_errors": ("Latest errors", [*RUN, Column("Error", _key("error_text"))]),
}  # fmt: skip


def rendered(name: str, rows: list[Row], scope: Scope) -> dict[str, Any]:
    """What the template shows of a table: its title, headers, and cells with their links."""
    title, columns = TABLES[name]
    return {
        "name": name,
        "title": title,
        "columns": [(c.title, c.unit) for c in columns],
        "rows": [
            [
                (shown(c.value(row), c.unit), c.link(row, scope) if c.link else None, c.unit)
                for c in columns
            ]
            for row in rows
        ],
    }


def _cell(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else safe_cell(value)


def csv_response(name: str, rows: list[Row], filename: str) -> HttpResponse:
    """The table as a CSV attachment: raw values, text that could run as a formula quoted."""
    _, columns = TABLES[name]
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow([c.title for c in columns])
    for row in rows:
        writer.writerow([_cell(c.value(row)) for c in columns])
    return response
