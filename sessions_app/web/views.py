"""Pages and htmx fragments of the chat: thin adapters over the services."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from sessions_app.ids import session_id_or_none
from sessions_app.llm import probe
from sessions_app.models import Agent, Session
from sessions_app.services import feedback, sessions, statesize
from sessions_app.services.access import NotFound, get_session_for_user
from sessions_app.services.permissions import Action, staff_may
from sessions_app.web import links
from sessions_app.web.rendering import render_session_item, run_view, tools_of

SIDEBAR_PAGE_SIZE = 30


def _db_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


async def _layer_ok() -> bool:
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        channel = await layer.new_channel()
        probe = {"type": "healthz.probe", "nonce": uuid.uuid4().hex}
        await layer.send(channel, probe)
        return await asyncio.wait_for(layer.receive(channel), 2.0) == probe
    except Exception:
        return False


@require_GET
async def healthz(request: HttpRequest) -> JsonResponse:
    # The database and the channel layer are this deployment's own, checked live; the model's
    # server may be someone else's (and metered), so it is probed at most every few seconds.
    checks = sync_to_async(_db_ok)(), _layer_ok(), probe.reachable()
    db_ok, layer_ok, llm_ok = await asyncio.gather(*checks)
    body = {
        "db": "ok" if db_ok else "error",
        "channel_layer": "ok" if layer_ok else "error",
        "llm": "ok" if llm_ok else "unreachable",
    }
    return JsonResponse(body, status=200 if db_ok and layer_ok else 503)


def _session_or_404(request: HttpRequest, session_id: str, action: Action = "view") -> Session:
    """The session to `action`; someone else's is a 404, or a 403 (Django's PermissionDenied)
    for staff without the right."""
    try:
        return get_session_for_user(request.user, session_id, action)
    except NotFound as exc:
        raise Http404("No such chat.") from exc


class BadCursor(ValueError):
    """A sidebar position that no page of ours wrote."""


def _cursor_text(cursor: sessions.ActivityCursor | None) -> str:
    """The last session shown, for the "load more" link: its last activity and its id."""
    return "" if cursor is None else f"{cursor[0].isoformat()},{cursor[1]}"


def _parse_cursor(text: str) -> sessions.ActivityCursor:
    when, _, session_id = text.partition(",")
    if session_id_or_none(session_id) is None:
        raise BadCursor(text)
    return _parse_moment(when), session_id


def _parse_moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadCursor(text) from exc
    if moment.tzinfo is None:
        raise BadCursor(text)
    return moment


def _sidebar_page(
    request: HttpRequest,
    after: sessions.ActivityCursor | None = None,
    since: datetime | None = None,
) -> dict[str, Any]:
    """A page of the sidebar; with `since` (when the list was last brought up to date), also
    the chats active since then, which moved above the cursor: they go to the top, out of the
    places they were shown in, so that none is missing or shown twice."""
    now = timezone.now()
    # No stored text holds a NUL, and PostgreSQL refuses one in a query.
    q = (request.GET.get("q") or "").replace("\x00", "").strip()[:200]
    listed = sessions.list_sessions(request.user, search=q or None)
    rows, more = sessions.page_by_activity(listed, SIDEBAR_PAGE_SIZE, after=after)
    moved = sessions.active_since(listed, since, SIDEBAR_PAGE_SIZE) if since else []
    return {
        "sessions": rows,
        "moved": moved,
        "since": now.isoformat(),
        "next_cursor": _cursor_text(more),
        "first_page": after is None,
        "q": q,
    }


def _conversation_context(request: HttpRequest, session: Session | None) -> dict[str, Any]:
    context: dict[str, Any] = {"session": session, "max_input": settings.PARLEY_MAX_INPUT_CHARS}
    if session is None:
        # The choices for a new chat: agents made by an import stay out until listed.
        agents = list(Agent.objects.filter(listed=True).order_by("-is_default", "name"))
        context |= {
            "runs": [],
            "agents": agents,
            "example_agents": [agent.name for agent in agents if agent.shows_examples],
            "agent_name": agents[0].name if agents else "the agent",
            "title": "New chat",
        }
    else:
        runs = list(session.runs.order_by("position"))
        used, waiting = tools_of(session, runs)
        context |= {
            "runs": [
                run_view(run, tools=used.get(str(run.run_id)), waiting=waiting.get(str(run.run_id)))
                for run in runs
            ],
            "agent_name": session.agent.name,
            "current_id": session.session_id,
            **_header_context(request, session),
        }
    return context


def _header_context(request: HttpRequest, session: Session) -> dict[str, Any]:
    """The header's title and the controls this person may use: staff reading someone else's
    chat see only those their permissions allow, and no composer."""
    own = session.user_id == request.user.pk
    return {
        "session": session,
        "title": sessions.session_title(session),
        "own": own,
        "may_change": own or staff_may(request.user, "change", Session),
        "may_delete": own or staff_may(request.user, "delete", Session),
        "links": links.links_for(session, own),
    }


def _chat_page(request: HttpRequest, session: Session | None) -> HttpResponse:
    context = _conversation_context(request, session)
    if request.htmx and request.htmx.target == "pane":
        return render(request, "sessions_app/_conversation.html", context)
    context |= _sidebar_page(request)
    return render(request, "sessions_app/chat.html", context)


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return _chat_page(request, None)


@login_required
@require_GET
def session_page(request: HttpRequest, session_id: str) -> HttpResponse:
    return _chat_page(request, _session_or_404(request, session_id))


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """A page of the sidebar: the first, or the one below `after` (the "load more" link's
    cursor)."""
    try:
        after = _parse_cursor(request.GET["after"]) if request.GET.get("after") else None
        since = _parse_moment(request.GET["since"]) if request.GET.get("since") else None
    except BadCursor:
        return HttpResponse("This place in the list is not valid; reload the page.", status=400)
    context = _sidebar_page(request, after, since)
    return render(request, "sessions_app/_session_items.html", context)


@login_required
@require_POST
def session_rename(request: HttpRequest, session_id: str) -> HttpResponse:
    name = (request.POST.get("session_name") or "").strip()
    if not name:
        return HttpResponse("A name cannot be empty.", status=422)
    try:
        session = sessions.update_session(request.user, session_id, session_name=name)
    except NotFound as exc:
        raise Http404("No such chat.") from exc
    response = render(request, "sessions_app/_conv_header.html", _header_context(request, session))
    # The sidebar shows the new name too.
    response.write(render_session_item(session, current=True, oob="outerHTML"))
    return response


@login_required
@require_POST
def session_delete(request: HttpRequest, session_id: str) -> HttpResponse:
    try:
        sessions.delete_session(request.user, session_id)
    except NotFound as exc:
        raise Http404("No such chat.") from exc
    except sessions.SessionBusy as exc:
        return HttpResponse(str(exc), status=409)
    if request.htmx:
        return HttpResponseClientRedirect("/")
    return HttpResponse(status=204)


@login_required
@require_POST
def run_feedback(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    try:
        rating = int(request.POST.get("rating", ""))
    except ValueError:
        return HttpResponse("rating must be 1, -1 or 0.", status=422)
    if rating not in (1, -1, 0):
        return HttpResponse("rating must be 1, -1 or 0.", status=422)
    try:
        run = feedback.set_feedback(request.user, run_id, rating or None)
    except NotFound as exc:
        raise Http404("No such answer.") from exc
    return render(request, "sessions_app/_feedback.html", {"r": run_view(run)})


def _settings_context(session: Session, **extra: Any) -> dict[str, Any]:
    history = [
        {"position": position, "state": json.dumps(state, sort_keys=True)}
        for position, state in session.runs.filter(session_state__isnull=False)
        .order_by("position")
        .values_list("position", "session_state")
    ]
    return {
        "session": session,
        "example_agents": [session.agent.name] if session.agent.shows_examples else [],
        "state_json": json.dumps(session.session_state, indent=2, sort_keys=True),
        "state_history": history,
        **extra,
    }


@login_required
@require_GET
def session_settings(request: HttpRequest, session_id: str) -> HttpResponse:
    session = _session_or_404(request, session_id)
    return render(request, "sessions_app/_session_settings.html", _settings_context(session))


@login_required
@require_POST
def session_state(request: HttpRequest, session_id: str) -> HttpResponse:
    session = _session_or_404(request, session_id, "change")
    raw = request.POST.get("session_state", "")
    try:
        state = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        state, error = None, f"That is not valid JSON: {exc.msg} (line {exc.lineno})."
    else:
        error = "" if isinstance(state, dict) else "The state must be a JSON object: {…}."
    if not error:
        try:
            session = sessions.update_session(request.user, session.session_id, session_state=state)
        except statesize.StateTooLarge as exc:
            error = str(exc)
    if error:
        # 422, not 413: the page shows validation errors in place (see base.html).
        context = _settings_context(session, state_error=error)
        context["state_json"] = raw
        return render(request, "sessions_app/_session_settings.html", context, status=422)
    return render(
        request, "sessions_app/_session_settings.html", _settings_context(session, state_saved=True)
    )
