"""The owner's share pages (a session's link: make, update, replace, revoke; their list on the
settings page) and the shared page itself."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions_app.models import Session
from sessions_app.services.access import NotFound, get_sessions_for_owner
from sessions_app.services.markdown import render_markdown
from shares_app import links
from shares_app.models import ShareLink

ROBOTS = "noindex, nofollow, noarchive"


class ShareForm(forms.Form):
    show_owner = forms.BooleanField(required=False, label="Show my name")
    show_tools = forms.BooleanField(
        required=False, label="Show the tools the agent used and what they returned"
    )
    expires = forms.ChoiceField(
        choices=[("", "Never"), ("1", "In a day"), ("7", "In a week"), ("30", "In 30 days")],
        required=False,
        label="Expires",
    )


def _own_session(request: HttpRequest, session_id: str) -> Session:
    """The session, if it is the asker's own: only its owner shares it."""
    found = get_sessions_for_owner(request.user, [session_id])[0]
    if isinstance(found, NotFound):
        raise Http404("No such chat.")
    if isinstance(found, PermissionDenied):
        raise PermissionDenied("Only the owner of a chat can share it.")
    if isinstance(found, Exception):
        raise found
    return found


@login_required
@require_http_methods(["GET", "POST"])
def share_session(request: HttpRequest, session_id: str) -> HttpResponse:
    session = _own_session(request, session_id)
    link = links.live_link(session)
    form = ShareForm(request.POST or None)
    token = None
    action = request.POST.get("action")
    if request.method == "POST":
        if action in ("create", "replace") and form.is_valid():
            data = form.cleaned_data
            token = links.create(
                session,
                show_owner=data["show_owner"],
                show_tools=data["show_tools"],
                days=links.EXPIRIES[data["expires"]],
            )
            link = links.live_link(session)
        elif action == "update" and link is not None:
            links.update(link)
            messages.success(request, "The link now shows the chat as it is now.")
            return redirect("share_session", session_id=session.pk)
        elif action == "revoke" and link is not None:
            links.revoke(link)
            messages.success(request, "The link is revoked: it opens nothing any more.")
            return redirect("share_session", session_id=session.pk)
    context = {
        "session": session,
        "link": link,
        "form": form,
        "token": token,
        "public_links": settings.PARLEY_PUBLIC_SHARE_LINKS,
    }
    if token:
        context["url"] = request.build_absolute_uri(f"/share/{token}/")
    return render(request, "shares_app/share_session.html", context)


@login_required
@require_POST
def link_action(request: HttpRequest, link_id: str, action: str) -> HttpResponse:
    """Update or revoke one of the asker's links, from their settings page."""
    link = get_object_or_404(ShareLink, pk=link_id, owner=request.user)
    if action == "revoke":
        links.revoke(link)
        messages.success(request, f"Revoked the link to “{link.session}”.")
    elif action == "update":
        if link.live():
            links.update(link)
            messages.success(request, f"The link to “{link.session}” shows the chat as it is now.")
    else:
        raise Http404("No such action.")
    return redirect("account_settings")


@require_GET
def shared(request: HttpRequest, token: str) -> HttpResponse:
    if not settings.PARLEY_PUBLIC_SHARE_LINKS and not request.user.is_authenticated:
        response = redirect_to_login(request.get_full_path())
    elif (link := links.find(token)) is None:
        response = render(request, "shares_app/shared_gone.html", status=404)
    else:
        response = render(request, "shares_app/shared.html", _shared_context(link))
    response["X-Robots-Tag"] = ROBOTS
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "private, no-store"
    return response


def _shared_context(link: ShareLink) -> dict[str, Any]:
    # The snapshot holds the tools only when the owner chose to show them (snapshot.take).
    runs = [{**run, "html": render_markdown(run["content"])} for run in link.snapshot["runs"]]
    owner = link.owner.get_username() if link.show_owner else ""
    return {"link": link, "runs": runs, "owner": owner, "robots": ROBOTS}


def settings_section(request: HttpRequest) -> dict[str, Any] | None:
    mine = ShareLink.objects.filter(owner=request.user).select_related("session")[:100]
    return {"links": list(mine)}
