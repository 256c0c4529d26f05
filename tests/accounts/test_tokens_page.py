"""The API tokens page: a token is shown once, works as a Bearer token, and can be revoked."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, time, timedelta

import pytest
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone

from sessions_app.accounts import create_token
from sessions_app.models import ApiToken

pytestmark = pytest.mark.django_db


def raw_token_in(html: str) -> str:
    found = re.search(r'data-testid="new-token-value">([^<]+)<', html)
    assert found, "the new token is not shown"
    return found.group(1)


def test_the_page_needs_a_signed_in_user(client):
    response = client.get("/tokens/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def create_on_page(signed_in: Client, form: dict) -> HttpResponse:
    """The tokens form sent, and the page it leads to."""
    return signed_in.post("/tokens/", form, follow=True)


def test_a_created_token_is_shown_once_and_only_its_hash_is_kept(signed_in, alice):
    response = signed_in.post("/tokens/", {"name": "laptop script"})
    assert response.status_code == 302 and response["Location"] == "/tokens/"
    shown = signed_in.get("/tokens/")
    raw = raw_token_in(shown.content.decode())
    assert raw not in response["Location"]
    assert "no-store" in shown["Cache-Control"]
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop script"
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    again = signed_in.get("/tokens/").content.decode()  # a reload
    assert raw not in again and 'data-testid="new-token"' not in again
    assert ApiToken.objects.filter(user=alice).count() == 1  # nothing was sent again


def test_a_new_token_is_shown_only_to_the_browser_that_made_it(signed_in, alice):
    signed_in.post("/tokens/", {"name": "laptop script"})
    other_tab_elsewhere = Client()  # the same account, signed in on another computer
    other_tab_elsewhere.force_login(alice)
    assert 'data-testid="new-token"' not in other_tab_elsewhere.get("/tokens/").content.decode()
    assert raw_token_in(signed_in.get("/tokens/").content.decode())


def test_a_token_whose_secret_cannot_be_shown_says_so_and_can_be_revoked(signed_in, alice):
    signed_in.post("/tokens/", {"name": "laptop script"})
    signed_in.cookies.pop("parley_new_token")  # five minutes passed, or the cookie was blocked

    page = signed_in.get("/tokens/").content.decode()

    assert 'data-testid="new-token-lost"' in page and "laptop script" in page
    assert 'data-testid="new-token-value"' not in page
    assert ApiToken.objects.filter(user=alice, name="laptop script").exists()


def test_the_new_token_opens_the_api_and_its_last_use_is_listed(signed_in, alice):
    raw = raw_token_in(create_on_page(signed_in, {"name": "ci"}).content.decode())
    assert "never" in signed_in.get("/tokens/").content.decode()
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get("/api/sessions").status_code == 200
    page = signed_in.get("/tokens/").content.decode()
    token = ApiToken.objects.get(user=alice)
    assert token.last_used_at is not None
    assert "never" not in page
    assert f"{token.prefix}…" in page and "ci" in page


def test_the_list_shows_only_ones_own_tokens(signed_in, bob):
    create_token(bob, "bobs secret tool")
    assert "bobs secret tool" not in signed_in.get("/tokens/").content.decode()


def test_revoking_asks_first_then_the_token_stops_working(signed_in, alice):
    token, raw = create_token(alice, "old")
    confirm = signed_in.get(f"/tokens/{token.pk}/revoke/")
    assert confirm.status_code == 200
    assert "Revoke old?" in confirm.content.decode()
    assert ApiToken.objects.filter(pk=token.pk).exists()  # asking changes nothing

    response = signed_in.post(f"/tokens/{token.pk}/revoke/", follow=True)
    assert response.redirect_chain == [("/tokens/", 302)]
    assert "revoked" in response.content.decode()
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get("/api/sessions").status_code == 401


def test_it_rejects_other_users_tokens(signed_in, bob):
    token, _ = create_token(bob, "theirs")
    assert signed_in.get(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert signed_in.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert signed_in.post(f"/tokens/{token.pk}/rename/", {"name": "mine now"}).status_code == 404
    token.refresh_from_db()
    assert token.name == "theirs"
    assert signed_in.post("/tokens/999999/revoke/").status_code == 404


def test_a_token_can_be_renamed(signed_in, alice):
    token, _ = create_token(alice, "old name")
    response = signed_in.post(f"/tokens/{token.pk}/rename/", {"name": "  new name  "})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.name == "new name"


def test_the_forms_are_protected_against_csrf(alice):
    signed_in = Client(enforce_csrf_checks=True)
    signed_in.force_login(alice)
    assert signed_in.post("/tokens/", {"name": "forged"}).status_code == 403
    token, _ = create_token(alice, "keep")
    assert signed_in.post(f"/tokens/{token.pk}/revoke/").status_code == 403
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["keep"]


@pytest.mark.parametrize(
    ("form", "days"), [({}, None), ({"expires": "30"}, 30), ({"expires": "90"}, 90)]
)
def test_a_token_is_made_to_expire_never_or_in_30_or_90_days(signed_in, alice, form, days):
    response = create_on_page(signed_in, {"name": "ci", **form})
    assert response.status_code == 200 and raw_token_in(response.content.decode())
    token = ApiToken.objects.get(user=alice)
    if days is None:
        assert token.expires_at is None
        assert "no expiry" in signed_in.get("/tokens/").content.decode()
    else:
        left = token.expires_at - timezone.now()
        assert timedelta(days=days) - timedelta(minutes=1) < left <= timedelta(days=days)
        assert (
            token.expires_at.strftime("%Y-%m-%d %H:%M")
            in signed_in.get("/tokens/").content.decode()
        )


def test_a_token_made_to_expire_on_a_date_works_through_that_day(signed_in, alice):
    day = timezone.localdate() + timedelta(days=10)
    response = create_on_page(signed_in, {"expires": "date", "expires_on": day.isoformat()})
    raw = raw_token_in(response.content.decode())
    token = ApiToken.objects.get(user=alice)
    assert token.expires_at == datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
    assert (
        Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/sessions").status_code == 200
    )


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({"expires": "date"}, "Choose the date the token expires on."),
        (
            {"expires": "date", "expires_on": "2001-01-01"},
            "The expiry date must be today or later.",
        ),
        ({"expires": "7"}, "Select a valid choice."),
    ],
)
def test_a_missing_or_past_expiry_date_is_refused(signed_in, alice, form, error):
    response = signed_in.post("/tokens/", form)
    assert error in response.content.decode()
    assert not ApiToken.objects.exists()


def test_an_expired_token_is_listed_as_expired_and_answers_401_saying_when(signed_in, alice):
    raw = raw_token_in(create_on_page(signed_in, {"expires": "30"}).content.decode())
    ended = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    ApiToken.objects.update(expires_at=ended)  # thirty days later
    response = Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/sessions")
    assert response.status_code == 401
    assert response.json() == {"detail": "This token expired on 2026-01-05 09:30 UTC."}
    assert "expired" in signed_in.get("/tokens/").content.decode()
