"""SQL-looking and Unicode-hostile text in every search box and filter: answered normally, never
a 500, and finding exactly what it should."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.models import Session
from tests.support.apiclient import bearer, default_agent, stored_run

pytestmark = pytest.mark.django_db

HOSTILE = [
    "' OR '1'='1",
    "'; DROP TABLE sessions_app_session; --",
    '" OR ""="',
    "1) UNION SELECT username, password FROM sessions_app_user --",
    "%",
    "_",
    "50%_off",
    "\\",
    "\\%",
    "*",
    "[a-z]",
    "$where: 1",
    "\u202etxt.exe",  # right-to-left override
    "Z\u0351\u0362a\u0336\u0321l\u0334go",  # combining marks
    "👩‍👩‍👧‍👦 family",  # zero-width joiners
    "\ufeffbom",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "ｆｕｌｌｗｉｄｔｈ",
    "i̇stanbul",
    "\u0000nul",
    "tab\there",
    "line\nbreak",
    "x" * 5000,
]


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", password=None)


@pytest.fixture
def named(alice):
    """One of alice's sessions named after each hostile string (without NUL, which cannot be
    stored), each with a run whose question repeats it, and a plain one."""
    agent = default_agent()
    sessions = {}
    for text in [*HOSTILE, "plain session"]:
        name = text.replace("\u0000", "")[:200]
        session = Session.objects.create(user=alice, agent=agent, session_name=name)
        stored_run(session, f"about {name}", "fine")
        sessions[text] = session
    return sessions


def found_by(text: str, sessions: dict[str, Session]) -> set[str]:
    """The sessions whose name contains `text` (in any case)."""
    wanted = text.casefold()
    return {str(s.pk) for s in sessions.values() if wanted in s.session_name.casefold()}


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_the_api_session_name_filter(alice, named, text):
    client = Client(headers=bearer(alice))

    response = client.get("/api/sessions", {"session_name": text, "limit": 100})

    if "\u0000" in text:
        assert response.status_code == 422  # no name can hold it
        return
    assert response.status_code == 200, response.content
    shown = {s["session_id"] for s in response.json()["data"]}
    assert shown == found_by(text, named)
    if len(text) <= 200:  # a name holds 200 characters
        assert str(named[text].pk) in shown


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_the_chat_sidebar_search(alice, named, text):
    client = Client()
    client.force_login(alice)

    response = client.get("/sessions/", {"q": text})

    assert response.status_code == 200
    if "\u0000" not in text and len(text) <= 200:  # the box reads 200 characters
        assert str(named[text].pk) in response.content.decode()


ADMIN_LISTS = [
    "/admin/sessions_app/session/",
    "/admin/sessions_app/run/",
    "/admin/sessions_app/message/",
    "/admin/sessions_app/llmcall/",
    "/admin/sessions_app/agent/",
    "/admin/sessions_app/apitoken/",
    "/admin/sessions_app/user/",
    "/admin/datasets_app/dataset/",
    "/admin/datasets_app/datasetitem/",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_every_admin_search(root, named, text):
    client = Client()
    client.force_login(root)
    for path in ADMIN_LISTS:
        response = client.get(path, {"q": text})
        assert response.status_code == 200, path
    if "\u0000" not in text and len(text) <= 200:
        sessions = client.get(ADMIN_LISTS[0], {"q": text}).content.decode()
        assert f"/admin/sessions_app/session/{named[text].pk}/change/" in sessions
        if text == "%":
            assert f"{named['plain session'].pk}/change/" not in sessions


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_the_dashboard_filters(root, named, text):
    client = Client()
    client.force_login(root)

    by_model = client.get("/admin/dashboard/", {"model": text[:200]})
    assert by_model.status_code == (400 if "\u0000" in text else 200)
    unknown_user = client.get("/admin/dashboard/", {"user": text})
    assert unknown_user.status_code == 400  # a form error, shown on the page
    assert 'class="error" role="alert"' in unknown_user.content.decode()
