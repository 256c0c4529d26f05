"""API tokens at rest: no table holds a raw token, and only the exact token opens the API.

A token is found by the SHA-256 digest of what is presented, through the unique index: what a
comparison's timing could tell is about digests, which say nothing of the token that matches.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.sessions.models import Session as StoredSession
from django.core.management import call_command
from django.test import Client

from sessions_app.models import ApiToken

pytestmark = pytest.mark.django_db


def every_stored_value() -> str:
    """Every row of every table, as text."""
    return "\n".join(
        repr(row) for model in apps.get_models() for row in model.objects.values_list()
    )


def api_status(raw: str) -> int:
    return Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/sessions").status_code


def test_no_table_holds_a_token_made_on_the_page_or_by_the_command(alice, capsys):
    browser = Client()
    browser.force_login(alice)
    page = browser.post("/tokens/", {"name": "laptop"}, follow=True).content.decode()
    from_page = page.split('data-testid="new-token-value">')[1].split("<")[0]
    call_command("create_api_token", "alice", "--name", "ci")
    from_command = capsys.readouterr().out.strip().splitlines()[-1]

    assert api_status(from_page) == 200 and api_status(from_command) == 200
    stored = every_stored_value()
    assert ApiToken.objects.count() == 2
    assert from_page not in stored and from_command not in stored
    assert from_page[4:] not in stored and from_command[4:] not in stored  # nor without prefix


def test_no_table_nor_cookie_holds_a_new_token_on_its_way_to_the_page(alice):
    browser = Client()
    browser.force_login(alice)
    redirect = browser.post("/tokens/", {"name": "laptop"})
    # Between the form and the page it leads to: the tables (sessions decoded), the cookies.
    sessions = [s.get_decoded() for s in StoredSession.objects.all()]
    in_between = [every_stored_value(), repr(sessions), redirect["Location"]]
    in_between += [morsel.value for morsel in browser.cookies.values()]
    page = browser.get(redirect["Location"]).content.decode()
    raw = page.split('data-testid="new-token-value">')[1].split("<")[0]
    assert api_status(raw) == 200
    for place in in_between:
        assert raw not in place and raw[4:] not in place
    assert not browser.cookies["parley_new_token"].value  # dropped once shown
    assert all("parley_new_token" not in s.get_decoded() for s in StoredSession.objects.all())


def test_only_the_exact_token_opens_the_api(alice, capsys):
    call_command("create_api_token", "alice")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    stored = ApiToken.objects.get()
    last = raw[-1]
    altered = raw[:-1] + ("A" if last != "A" else "B")

    assert api_status(raw) == 200
    assert api_status(altered) == 401
    assert api_status(raw[:-1]) == 401
    assert api_status(stored.token_hash) == 401  # the digest is not a credential
    assert api_status(stored.prefix) == 401
    assert api_status(raw.upper()) == 401
