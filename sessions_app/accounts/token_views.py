"""The API tokens page: create (the raw token is shown once, after a redirect), rename, list and
revoke one's own."""

from __future__ import annotations

import secrets
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from sessions_app.accounts import tokens as token_service
from sessions_app.models import Agent, ApiToken, User
from sessions_app.services.access import NotFound, usable_agents


class TokenNameForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, strip=True)


class TokenCreateForm(TokenNameForm):
    """A name, when the token stops working (never, after 30 or 90 days, or after a date), and
    the agents it may use: any of those its maker may use, or, choosing none, all of them."""

    expires = forms.ChoiceField(
        choices=[("", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("date", "On a date")],
        required=False,
        label="Expires",
    )
    expires_on = forms.DateField(
        required=False, label="Expiry date", widget=forms.DateInput(attrs={"type": "date"})
    )
    agents = forms.ModelMultipleChoiceField(
        queryset=Agent.objects.none(),
        required=False,
        label="Agents",
        help_text="The agents it may use; choose none for every agent you may use.",
    )

    def __init__(self, user: User, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agents = usable_agents(user).order_by("name", "created_at")
        self.fields["agents"].queryset = agents  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        choice, day = data.get("expires"), data.get("expires_on")
        data["expires_at"] = None
        try:
            if choice == "date" and day is None:
                self.add_error("expires_on", "Choose the date the token expires on.")
            elif choice == "date":
                data["expires_at"] = token_service.expiry_on(day)
            elif choice:
                data["expires_at"] = token_service.expiry_in_days(int(choice))
        except ValueError as exc:
            self.add_error("expires_on", str(exc))
        return data


# A new token is shown by the page the browser is redirected to, so that reloading it sends
# nothing again. Its secret crosses the redirect in two halves that each say nothing alone: a
# one-time pad in a cookie, and the secret XOR that pad in the session. So no table (not even
# the sessions') and no cookie jar holds the secret, and the page that shows it drops both.
NEW_TOKEN = "parley_new_token"
NEW_TOKEN_SECONDS = 300


def _hand_over(request: HttpRequest, token: ApiToken, raw: str) -> HttpResponse:
    """The redirect to the tokens page, carrying the new token's secret in its two halves."""
    secret = raw.encode()
    pad = secrets.token_bytes(len(secret))
    request.session[NEW_TOKEN] = {"token_id": token.pk, "sealed": _xor(secret, pad).hex()}
    response = redirect("api_tokens")
    response.set_cookie(
        NEW_TOKEN,
        pad.hex(),
        max_age=NEW_TOKEN_SECONDS,
        path=reverse("api_tokens"),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )
    return response


def _take_over(request: HttpRequest) -> dict[str, Any] | None:
    """The new token and its secret, once: the session's half is dropped here, the cookie's
    by `_drop_pad` on the page that shows it. Without the cookie's half (expired, blocked, or
    another try's), the token is named with no secret, so its maker knows to revoke it."""
    held = request.session.pop(NEW_TOKEN, None)
    if not isinstance(held, dict):
        return None
    try:
        token = token_service.get_token_for_user(request.user, held["token_id"])
    except (KeyError, TypeError, NotFound):
        return None  # revoked since: nothing to show
    try:
        pad = bytes.fromhex(request.COOKIES[NEW_TOKEN])
        raw = _xor(bytes.fromhex(held["sealed"]), pad).decode("ascii")
    except (KeyError, ValueError, TypeError):
        raw = None
    return {"token": token, "raw": raw}


def _drop_pad(request: HttpRequest, response: HttpResponse) -> None:
    if NEW_TOKEN in request.COOKIES:
        response.delete_cookie(NEW_TOKEN, path=reverse("api_tokens"), samesite="Lax")


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))


@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        cleaned = form.cleaned_data
        try:
            token, raw = token_service.create_token(
                request.user, cleaned["name"], cleaned["expires_at"], cleaned["agents"]
            )
        except ValueError as exc:  # an agent unlisted, or the expiry passed, since the check
            form.add_error(None, str(exc))
        else:
            return _hand_over(request, token, raw)
    created = _take_over(request) if request.method == "GET" else None
    context = {
        "form": form,
        "created": created,
        "tokens": token_service.tokens_for_user(request.user),
    }
    response = render(request, "sessions_app/tokens.html", context)
    _drop_pad(request, response)
    if created is not None:
        add_never_cache_headers(response)  # the secret stays out of the browser's cache
    return response


@login_required
@require_POST
def rename_token(request: HttpRequest, token_id: int) -> HttpResponse:
    form = TokenNameForm(request.POST)
    if form.is_valid():
        try:
            token_service.rename_token(request.user, token_id, form.cleaned_data["name"])
        except NotFound as exc:
            raise Http404 from exc
        messages.success(request, "Token renamed.")
    return redirect("api_tokens")


@login_required
@require_http_methods(["GET", "POST"])
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    """GET asks for confirmation; POST revokes. Programs using the token get 401 from then on."""
    try:
        if request.method == "POST":
            token = token_service.revoke_token(request.user, token_id)
            messages.success(request, f"Token {token} revoked.")
            return redirect("api_tokens")
        token = token_service.get_token_for_user(request.user, token_id)
    except NotFound as exc:
        raise Http404 from exc
    return render(request, "sessions_app/token_revoke.html", {"token": token})
