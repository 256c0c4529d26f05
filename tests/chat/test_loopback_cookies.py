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


@pytest.mark.django_db
@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000"])
def test_signing_in_from_a_loopback_page_works(production_cookies, alice, host):
    """As a browser at http://127.0.0.1:8000 sends it: with the page's Origin and Referer."""
    page = f"http://{host}/accounts/login/"
    browser = Client(enforce_csrf_checks=True, HTTP_HOST=host)
    form = browser.get("/accounts/login/")
    keeping_secure_cookies_to_itself(browser)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)

    answer = browser.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123", "csrfmiddlewaretoken": token},
        headers={"Origin": f"http://{host}", "Referer": page},
    )
    keeping_secure_cookies_to_itself(browser)

    assert answer.status_code == 302 and answer["Location"] == "/"
    assert browser.get("/", headers={"Referer": page}).status_code == 200


# What a request that came through a proxy, or from elsewhere, shows though its Host is loopback:
# a TLS-terminating proxy with nginx's default `proxy_set_header Host $proxy_host` names Parley
# 127.0.0.1, and its own request to Parley is plain HTTP.
THROUGH_A_PROXY = {
    "Forwarded": {"headers": {"Forwarded": "for=203.0.113.7;proto=https"}},
    "X-Forwarded-For": {"headers": {"X-Forwarded-For": "203.0.113.7"}},
    "X-Forwarded-Proto": {"headers": {"X-Forwarded-Proto": "https"}},
    "X-Forwarded-Host": {"headers": {"X-Forwarded-Host": "parley.example.com"}},
    "X-Real-IP": {"headers": {"X-Real-IP": "203.0.113.7"}},
    "a client elsewhere": {"REMOTE_ADDR": "10.0.0.5"},
    "an https Origin": {"headers": {"Origin": "https://parley.example.com"}},
    "an https Referer": {"headers": {"Referer": "https://parley.example.com/accounts/login/"}},
    "an Origin elsewhere": {"headers": {"Origin": "http://parley.example.com"}},
    "an https loopback Referer": {"headers": {"Referer": "https://127.0.0.1/accounts/login/"}},
}


@pytest.mark.django_db
@pytest.mark.parametrize("request_extra", THROUGH_A_PROXY.values(), ids=THROUGH_A_PROXY.keys())
def test_cookies_stay_secure_when_anything_but_this_machine_took_part(
    production_cookies, alice, request_extra
):
    browser = Client(HTTP_HOST="127.0.0.1")
    form = browser.get("/accounts/login/", **request_extra)
    assert form.cookies["csrftoken"]["secure"] is True
    answer = browser.post(
        "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}, **request_extra
    )
    assert answer.status_code == 302
    assert answer.cookies["sessionid"]["secure"] is True
    assert answer.cookies["csrftoken"]["secure"] is True
