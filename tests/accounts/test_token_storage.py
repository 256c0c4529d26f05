"""API tokens at rest: no table holds a raw token, and only the exact token opens the API.

A token is found by the SHA-256 digest of what is presented, through the unique index: what a
comparison's timing could tell is about digests, which say nothing of the token that matches.
"""

from __future__ import annotations

import pytest
from django.apps import apps
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
    page = browser.post("/tokens/", {"name": "laptop"}).content.decode()
    from_page = page.split('data-testid="new-token-value">')[1].split("<")[0]
    call_command("create_api_token", "alice", "--name", "ci")
    from_command = capsys.readouterr().out.strip().splitlines()[-1]

    assert api_status(from_page) == 200 and api_status(from_command) == 200
    stored = every_stored_value()
    assert ApiToken.objects.count() == 2
    assert from_page not in stored and from_command not in stored
    assert from_page[4:] not in stored and from_command[4:] not in stored  # nor without prefix


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
