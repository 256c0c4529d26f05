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


@pytest.fixture
def browser(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def raw_token_in(html: str) -> str:
    found = re.search(r'data-testid="new-token-value">([^<]+)<', html)
    assert found, "the new token is not shown"
    return found.group(1)


def test_the_page_needs_a_signed_in_user(client):
    response = client.get("/tokens/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def create_on_page(browser: Client, form: dict) -> HttpResponse:
    """The tokens form sent, and the page it leads to."""
    return browser.post("/tokens/", form, follow=True)


def test_a_created_token_is_shown_once_and_only_its_hash_is_kept(browser, alice):
    response = browser.post("/tokens/", {"name": "laptop script"})
    assert response.status_code == 302 and response["Location"] == "/tokens/"
    shown = browser.get("/tokens/")
    raw = raw_token_in(shown.content.decode())
    assert raw not in response["Location"]
    assert "no-store" in shown["Cache-Control"]
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop script"
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    again = browser.get("/tokens/").content.decode()  # a reload
    assert raw not in again and 'data-testid="new-token"' not in again
    assert ApiToken.objects.filter(user=alice).count() == 1  # nothing was sent again


def test_a_new_token_is_shown_only_to_the_browser_that_made_it(browser, alice):
    browser.post("/tokens/", {"name": "laptop script"})
    other_tab_elsewhere = Client()  # the same account, signed in on another computer
    other_tab_elsewhere.force_login(alice)
    assert 'data-testid="new-token"' not in other_tab_elsewhere.get("/tokens/").content.decode()
    assert raw_token_in(browser.get("/tokens/").content.decode())


def test_the_new_token_opens_the_api_and_its_last_use_is_listed(browser, alice):
    raw = raw_token_in(create_on_page(browser, {"name": "ci"}).content.decode())
    assert "never" in browser.get("/tokens/").content.decode()
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get("/api/sessions").status_code == 200
    page = browser.get("/tokens/").content.decode()
    token = ApiToken.objects.get(user=alice)
    assert token.last_used_at is not None
    assert "never" not in page
    assert f"{token.prefix}…" in page and "ci" in page


def test_the_list_shows_only_ones_own_tokens(browser, bob):
    create_token(bob, "bobs secret tool")
    assert "bobs secret tool" not in browser.get("/tokens/").content.decode()


def test_revoking_asks_first_then_the_token_stops_working(browser, alice):
    token, raw = create_token(alice, "old")
    confirm = browser.get(f"/tokens/{token.pk}/revoke/")
    assert confirm.status_code == 200
    assert "Revoke old?" in confirm.content.decode()
    assert ApiToken.objects.filter(pk=token.pk).exists()  # asking changes nothing

    response = browser.post(f"/tokens/{token.pk}/revoke/", follow=True)
    assert response.redirect_chain == [("/tokens/", 302)]
    assert "revoked" in response.content.decode()
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get("/api/sessions").status_code == 401


def test_it_rejects_other_users_tokens(browser, bob):
    token, _ = create_token(bob, "theirs")
    assert browser.get(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert browser.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert browser.post(f"/tokens/{token.pk}/rename/", {"name": "mine now"}).status_code == 404
    token.refresh_from_db()
    assert token.name == "theirs"
    assert browser.post("/tokens/999999/revoke/").status_code == 404


def test_a_token_can_be_renamed(browser, alice):
    token, _ = create_token(alice, "old name")
    response = browser.post(f"/tokens/{token.pk}/rename/", {"name": "  new name  "})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.name == "new name"


def test_the_forms_are_protected_against_csrf(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.post("/tokens/", {"name": "forged"}).status_code == 403
    token, _ = create_token(alice, "keep")
    assert browser.post(f"/tokens/{token.pk}/revoke/").status_code == 403
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["keep"]


@pytest.mark.parametrize(
    ("form", "days"), [({}, None), ({"expires": "30"}, 30), ({"expires": "90"}, 90)]
)
def test_a_token_is_made_to_expire_never_or_in_30_or_90_days(browser, alice, form, days):
    response = create_on_page(browser, {"name": "ci", **form})
    assert response.status_code == 200 and raw_token_in(response.content.decode())
    token = ApiToken.objects.get(user=alice)
    if days is None:
        assert token.expires_at is None
        assert "no expiry" in browser.get("/tokens/").content.decode()
    else:
        left = token.expires_at - timezone.now()
        assert timedelta(days=days) - timedelta(minutes=1) < left <= timedelta(days=days)
        assert (
            token.expires_at.strftime("%Y-%m-%d %H:%M") in browser.get("/tokens/").content.decode()
        )


def test_a_token_made_to_expire_on_a_date_works_through_that_day(browser, alice):
    day = timezone.localdate() + timedelta(days=10)
    response = create_on_page(browser, {"expires": "date", "expires_on": day.isoformat()})
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
def test_a_missing_or_past_expiry_date_is_refused(browser, alice, form, error):
    response = browser.post("/tokens/", form)
    assert error in response.content.decode()
    assert not ApiToken.objects.exists()


def test_an_expired_token_is_listed_as_expired_and_answers_401_saying_when(browser, alice):
    raw = raw_token_in(create_on_page(browser, {"expires": "30"}).content.decode())
    ended = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    ApiToken.objects.update(expires_at=ended)  # thirty days later
    response = Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/sessions")
    assert response.status_code == 401
    assert response.json() == {"detail": "This token expired on 2026-01-05 09:30 UTC."}
    assert "expired" in browser.get("/tokens/").content.decode()
