"""The API tokens page: create (the raw token is shown once), rename, list and revoke one's own."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from sessions_app.accounts import tokens as token_service
from sessions_app.services.access import NotFound


class TokenNameForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, strip=True)


class TokenCreateForm(TokenNameForm):
    """A name and when the token stops working: never, after 30 or 90 days, or after a date."""

    expires = forms.ChoiceField(
        choices=[("", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("date", "On a date")],
        required=False,
        label="Expires",
    )
    expires_on = forms.DateField(
        required=False, label="Expiry date", widget=forms.DateInput(attrs={"type": "date"})
    )

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


@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    created = None
    form = TokenCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        cleaned = form.cleaned_data
        token, raw = token_service.create_token(
            request.user, cleaned["name"], expires_at=cleaned["expires_at"]
        )
        # Rendered in the answer to the POST, not redirected: the raw token is never stored
        # anywhere (not even in the session) to be shown after a redirect.
        created = {"token": token, "raw": raw}
        form = TokenCreateForm()
    context = {
        "form": form,
        "created": created,
        "tokens": token_service.tokens_for_user(request.user),
    }
    return render(request, "sessions_app/tokens.html", context)


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
