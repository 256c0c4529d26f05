"""Session and CSRF cookies are Secure (with DEBUG off, SECURE_COOKIES at its default), except in
answers to plain HTTP addressed to loopback, where a strict client would otherwise keep them to
itself and never sign in."""

from __future__ import annotations

import re

import pytest
from django.test import Client


def keeping_secure_cookies_to_itself(client: Client) -> None:
    """What a strict client does with the cookies it got over plain HTTP."""
    for name in [name for name, cookie in client.cookies.items() if cookie["secure"]]:
        del client.cookies[name]


@pytest.fixture
def production_cookies(settings):
    """As `make run` has them: DEBUG off, SECURE_COOKIES left at its default."""
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True


@pytest.mark.django_db
@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"])
def test_signing_in_over_plain_http_on_loopback_works(production_cookies, alice, host):
    browser = Client(enforce_csrf_checks=True, HTTP_HOST=host)
    form = browser.get("/accounts/login/")
    keeping_secure_cookies_to_itself(browser)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)

    answer = browser.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123", "csrfmiddlewaretoken": token},
    )
    keeping_secure_cookies_to_itself(browser)

    assert answer.status_code == 302 and answer["Location"] == "/"
    assert browser.get("/").status_code == 200
    assert not answer.cookies["sessionid"]["secure"]


@pytest.mark.django_db
@pytest.mark.parametrize("secure,host", [(True, "127.0.0.1:8000"), (False, "testserver")])
def test_cookies_are_secure_over_https_and_away_from_loopback(
    production_cookies, alice, secure, host
):
    browser = Client(HTTP_HOST=host)
    answer = browser.post(
        "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}, secure=secure
    )
    assert answer.status_code == 302
    assert answer.cookies["sessionid"]["secure"] is True
    assert answer.cookies["csrftoken"]["secure"] is True
