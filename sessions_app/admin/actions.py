"""What staff do to a selection of rows: rate runs, take sessions or runs away as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from sessions_app.models import Message, Run, Session
from sessions_app.schemas import MessageOut, RunOut, SessionOut
from sessions_app.services.sessions import with_metrics

CHUNK = 200


def _rate(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run], rating: int) -> None:
    changed = queryset.order_by().update(feedback_rating=rating, feedback_at=timezone.now())
    label = "good" if rating == 1 else "bad"
    modeladmin.message_user(
        request, f"{changed} run{'s' * (changed != 1)} rated {label}.", messages.SUCCESS
    )


@admin.action(description="Rate the selected runs 👍 good", permissions=["change"])
def rate_up(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]) -> None:
    _rate(modeladmin, request, queryset, 1)


@admin.action(description="Rate the selected runs 👎 bad", permissions=["change"])
def rate_down(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]) -> None:
    _rate(modeladmin, request, queryset, -1)


def _json_download(items: Iterable[dict[str, Any]], filename: str) -> StreamingHttpResponse:
    def lines() -> Iterator[str]:
        yield "["
        for n, item in enumerate(items):
            yield ("," if n else "") + "\n" + json.dumps(item, ensure_ascii=False)
        yield "\n]\n"

    response = StreamingHttpResponse(lines(), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _chunks(queryset: QuerySet) -> Iterator[list[Any]]:
    keys = list(queryset.order_by().values_list("pk", flat=True))
    for start in range(0, len(keys), CHUNK):
        yield keys[start : start + CHUNK]


def _runs_as_json(runs: list[Run]) -> list[dict[str, Any]]:
    """Runs in the API's shape, each with its messages, in two queries however many."""
    by_run: dict[Any, list[dict[str, Any]]] = {run.pk: [] for run in runs}
    for message in Message.objects.filter(run__in=list(by_run)).order_by("run_id", "order"):
        by_run[message.run_id].append(MessageOut.from_orm(message).model_dump(mode="json"))
    return [
        {**RunOut.from_orm(run).model_dump(mode="json"), "messages": by_run[run.pk]} for run in runs
    ]


def _sessions(keys_chunks: Iterator[list[Any]]) -> Iterator[dict[str, Any]]:
    for keys in keys_chunks:
        sessions = list(Session.objects.filter(pk__in=keys).select_related("user", "agent"))
        with_metrics(sessions)
        runs = Run.objects.filter(session__in=keys).select_related("user").order_by("position")
        by_session: dict[str, list[dict[str, Any]]] = {}
        for run in _runs_as_json(list(runs)):
            by_session.setdefault(run["session_id"], []).append(run)
        for session in sorted(sessions, key=lambda s: s.created_at):
            shape = SessionOut.from_orm(session).model_dump(mode="json")
            yield {**shape, "runs": by_session.get(shape["session_id"], [])}


def _runs(keys_chunks: Iterator[list[Any]]) -> Iterator[dict[str, Any]]:
    for keys in keys_chunks:
        runs = Run.objects.filter(pk__in=keys).select_related("user")
        yield from _runs_as_json(list(runs.order_by("created_at")))


@admin.action(description="Export the selected sessions as JSON")
def export_sessions_json(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Session]
) -> StreamingHttpResponse:
    return _json_download(_sessions(_chunks(queryset)), "parley-sessions.json")


@admin.action(description="Export the selected runs as JSON")
def export_runs_json(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]
) -> StreamingHttpResponse:
    return _json_download(_runs(_chunks(queryset)), "parley-runs.json")
