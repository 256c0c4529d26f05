"""What staff do to a selection of rows: rate runs, take sessions or runs away as JSON."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from sessions_app import signals
from sessions_app.api.schemas.messages import MessageOut
from sessions_app.api.schemas.runs import RunOut
from sessions_app.api.schemas.sessions import SessionOut
from sessions_app.models import ACTIVE_STATUSES, Message, Run, Session
from sessions_app.services.sessions import with_metrics
from sessions_app.signals import send_run_rated

CHUNK = 200


def _rate(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run], rating: int) -> None:
    """Staff's rating of finished runs; a user's own feedback on them is left as it is."""
    selected = queryset.order_by()
    finished = selected.exclude(status__in=ACTIVE_STATUSES)
    stamp = timezone.now()
    changed = finished.update(staff_rating=rating, staff_rated_at=stamp)
    # The selection may have been filtered by rating: find the rated runs by their stamp.
    send_run_rated(Run.objects.filter(staff_rated_at=stamp, staff_rating=rating), "staff")
    running = selected.filter(status__in=ACTIVE_STATUSES).count()
    label = "good" if rating == 1 else "bad"
    note = f"; {running} still answering, left unrated" if running else ""
    message = f"{changed} run{'s' * (changed != 1)} rated {label} by staff{note}."
    modeladmin.message_user(request, message, messages.SUCCESS)


@admin.action(description="Rate the selected runs 👍 good (staff)", permissions=["change"])
def rate_up(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]) -> None:
    _rate(modeladmin, request, queryset, 1)


@admin.action(description="Rate the selected runs 👎 bad (staff)", permissions=["change"])
def rate_down(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]) -> None:
    _rate(modeladmin, request, queryset, -1)


def _json_download(
    queryset: QuerySet, shape: Callable[[list[Any]], list[dict[str, Any]]], filename: str
) -> StreamingHttpResponse:
    """The selection as one JSON array, oldest first, read and written a page at a time: an
    export of a million rows holds one page in memory, and daphne sends it as it goes."""
    model = queryset.model
    selected = model.objects.filter(pk__in=queryset.order_by().values("pk"))

    def page(after: tuple[Any, Any] | None) -> list[Any]:
        rows = selected.order_by("created_at", "pk")
        if after is not None:
            rows = rows.filter(Q(created_at__gt=after[0]) | Q(created_at=after[0], pk__gt=after[1]))
        return list(rows.values_list("created_at", "pk")[:CHUNK])

    async def lines() -> AsyncIterator[str]:
        yield "["
        after, count = None, 0
        while keys := await sync_to_async(page)(after):
            after = keys[-1]
            for item in await sync_to_async(shape)([pk for _, pk in keys]):
                yield ("," if count else "") + "\n" + json.dumps(item, ensure_ascii=False)
                count += 1
        yield "\n]\n"

    response = StreamingHttpResponse(lines(), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _runs_as_json(runs: list[Run]) -> list[dict[str, Any]]:
    """Runs in the API's shape, each with its messages, in two queries however many."""
    by_run: dict[Any, list[dict[str, Any]]] = {run.pk: [] for run in runs}
    for message in Message.objects.filter(run__in=list(by_run)).order_by("run_id", "order"):
        by_run[message.run_id].append(MessageOut.from_orm(message).model_dump(mode="json"))
    return [
        {**RunOut.from_orm(run).model_dump(mode="json"), "messages": by_run[run.pk]} for run in runs
    ]


def _sessions(keys: list[Any]) -> list[dict[str, Any]]:
    """Sessions in the API's shape, each with its runs and their messages."""
    sessions = list(Session.objects.filter(pk__in=keys).select_related("user", "agent"))
    with_metrics(sessions)
    runs = Run.objects.filter(session__in=keys).select_related("user", "agent_version")
    runs = runs.order_by("position")
    by_session: dict[str, list[dict[str, Any]]] = {}
    for run in _runs_as_json(list(runs)):
        by_session.setdefault(run["session_id"], []).append(run)
    out = []
    for session in sorted(sessions, key=lambda s: (s.created_at, s.pk)):
        shape = SessionOut.from_orm(session).model_dump(mode="json")
        out.append({**shape, "runs": by_session.get(shape["session_id"], [])})
    return out


def _runs(keys: list[Any]) -> list[dict[str, Any]]:
    runs = Run.objects.filter(pk__in=keys).select_related("user", "agent_version")
    return _runs_as_json(list(runs.order_by("created_at", "pk")))


@admin.action(description="Export the selected sessions as JSON")
def export_sessions_json(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Session]
) -> StreamingHttpResponse:
    _tell_exported(request, queryset)
    return _json_download(queryset, _sessions, "parley-sessions.json")


@admin.action(description="Export the selected runs as JSON")
def export_runs_json(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]
) -> StreamingHttpResponse:
    _tell_exported(request, queryset)
    return _json_download(queryset, _runs, "parley-runs.json")


def _tell_exported(request: HttpRequest, queryset: QuerySet[Any]) -> None:
    owners = sorted(set(queryset.order_by().values_list("user_id", flat=True)))
    signals.data_exported.send(
        queryset.model, reader=request.user, count=queryset.count(), owner_ids=owners
    )
