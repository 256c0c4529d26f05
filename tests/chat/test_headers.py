"""Production security headers and cookies, and the page a refused form gets."""

from __future__ import annotations

import re

import pytest
from django.test import AsyncClient, Client

from tests.support.processes import loaded_as_daphne_loads_it, printed_by

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/tokens/",
    "/settings/",
    "/admin/",
    "/admin/sessions_app/session/",
    "/admin/datasets_app/dataset/",
    "/admin/dashboard/",
    "/api/docs",
]


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = [part.strip().split() for part in header.split(";") if part.strip()]
    return {name: values for name, *values in directives}


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", password=None)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_has_the_policy_and_headers(root, path):
    client = Client()
    client.force_login(root)
    response = client.get(path)
    assert response.status_code == 200, path
    csp = policy(response)
    assert csp["script-src"] == ["'self'"]
    assert csp["default-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    assert csp["base-uri"] == ["'self'"] and csp["form-action"] == ["'self'"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_no_page_of_ours_has_an_inline_script(root):
    client = Client()
    client.force_login(root)
    for path in PAGES:
        page = client.get(path).content.decode()
        for tag in page.split("<script")[1:]:
            opening = tag.split(">", 1)[0]
            assert "src=" in opening or 'type="application/json"' in opening, (path, opening)


def test_the_login_page_has_the_policy(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert policy(response)["script-src"] == ["'self'"]


async def test_the_policy_is_set_on_the_event_loop_too():
    response = await AsyncClient().get("/accounts/login/")
    assert policy(response)["script-src"] == ["'self'"]


def test_hsts_is_sent_over_https_only(client, settings):
    settings.SECURE_HSTS_SECONDS = 3600
    assert "Strict-Transport-Security" not in client.get("/accounts/login/")
    secure = client.get("/accounts/login/", secure=True)
    assert secure["Strict-Transport-Security"] == "max-age=3600"


def test_behind_a_tls_proxy_its_header_makes_the_request_secure(client, settings):
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    response = client.get("/accounts/login/", headers={"X-Forwarded-Proto": "https"})
    assert response["Strict-Transport-Security"] == "max-age=3600"


def test_the_session_cookie_is_httponly_and_samesite(alice):
    client = Client()
    client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
    cookie = client.cookies["sessionid"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert client.cookies["csrftoken"]["samesite"] == "Lax"


PROBE = (
    "from django.conf import settings as s\n"
    "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS,"
    " s.SECURE_PROXY_SSL_HEADER)\n"
)


def test_production_cookies_are_secure_and_hsts_is_on():
    assert loaded_as_daphne_loads_it(PROBE) == ["True", "True", "31536000", "None"]


def test_production_settings_follow_the_environment():
    shown = loaded_as_daphne_loads_it(
        PROBE, SECURE_COOKIES="false", SECURE_HSTS_SECONDS="0", PROXY_SSL_HEADER="X-Forwarded-Proto"
    )
    assert shown == ["False", "False", "0", "('HTTP_X_FORWARDED_PROTO',", "'https')"]


def loaded_in_development(probe: str) -> list[str]:
    return printed_by("import django\ndjango.setup()\n" + probe, DEBUG="true")


def test_development_cookies_work_over_plain_http():
    probe = "from django.conf import settings as s\nprint(s.SESSION_COOKIE_SECURE)\n"
    assert loaded_in_development(probe) == ["False"]


# -- a refused form -----------------------------------------------------------------------------

PLAIN_HTTP_ADVICE = "set SECURE_COOKIES=false in its environment"


def text(response) -> str:
    """The page as a person reads it: no tags, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", "", response.content.decode()).split())


def test_secure_cookies_over_plain_http_say_what_to_do(settings, alice):
    settings.CSRF_COOKIE_SECURE = settings.SESSION_COOKIE_SECURE = True
    browser = Client(enforce_csrf_checks=True)
    browser.get("/accounts/login/")  # the browser keeps the secure cookie to itself

    response = browser.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123"},
        headers={"Cookie": ""},
    )

    assert response.status_code == 403
    page = text(response)
    assert "Use HTTPS: https://testserver/accounts/login/" in page
    assert PLAIN_HTTP_ADVICE in page


def test_over_https_a_missing_token_says_to_reload(settings):
    settings.CSRF_COOKIE_SECURE = settings.SESSION_COOKIE_SECURE = True
    browser = Client(enforce_csrf_checks=True)
    response = browser.post(
        "/accounts/login/",
        {},
        secure=True,
        headers={"Referer": "https://testserver/accounts/login/"},
    )
    assert response.status_code == 403
    page = text(response)
    assert "Reload the page and try again" in page and PLAIN_HTTP_ADVICE not in page
    assert "CSRF cookie not set" in page


def test_without_secure_cookies_a_missing_token_says_to_reload(settings):
    settings.CSRF_COOKIE_SECURE = settings.SESSION_COOKIE_SECURE = False
    response = Client(enforce_csrf_checks=True).post("/accounts/login/", {})
    assert response.status_code == 403
    assert "Reload the page and try again" in text(response)


async def test_the_explanation_is_rendered_on_the_event_loop(settings):
    settings.CSRF_COOKIE_SECURE = settings.SESSION_COOKIE_SECURE = True
    response = await AsyncClient(enforce_csrf_checks=True).post("/accounts/login/", {})
    assert response.status_code == 403
    assert PLAIN_HTTP_ADVICE in text(response)
