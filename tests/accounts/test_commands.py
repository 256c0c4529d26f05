"""The management commands and endpoints a deployment relies on."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import re
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.test import Client
from django.utils import timezone

from sessions_app.accounts import user_for_token
from sessions_app.models import Agent, ApiToken, User
from tests.support.asgiclient import ASGIClient


@pytest.mark.django_db
def test_migrate_leaves_a_default_agent_named_assistant(settings):
    from django.apps import apps

    default_agent = importlib.import_module("sessions_app.migrations.0002_default_agent")
    Agent.objects.all().delete()
    default_agent.create_default_agent(apps, None)
    default_agent.create_default_agent(apps, None)  # idempotent
    agent = Agent.objects.get()
    assert agent.is_default
    assert agent.name == "Assistant"
    assert agent.model == settings.LLM_MODEL
    assert agent.num_history_runs == 3 and agent.add_history_to_context


def test_create_api_token_prints_the_token_last_and_stores_only_a_hash(alice):
    out = StringIO()
    call_command("create_api_token", "alice", "--name", "laptop", stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop"
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in {token.token_hash, token.prefix} and raw.startswith(token.prefix)
    assert user_for_token(raw) == alice
    assert user_for_token(raw + "x") is None
    token.refresh_from_db()
    assert token.last_used_at is not None


@pytest.mark.django_db
def test_create_api_token_for_an_unknown_user_fails_clearly():
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_api_token", "nobody")


@pytest.mark.django_db
def test_ensure_admin_creates_the_admin_once_with_the_configured_password(monkeypatch):
    monkeypatch.setenv("PARLEY_ADMIN_PASSWORD", "s3cret-admin-pw")
    call_command("ensure_admin", stdout=StringIO())
    call_command("ensure_admin", stdout=StringIO())
    admin = User.objects.get(username="admin")
    assert admin.is_superuser and admin.check_password("s3cret-admin-pw")


@pytest.mark.django_db
def test_ensure_admin_generates_and_prints_a_password_when_none_is_set(monkeypatch):
    monkeypatch.delenv("PARLEY_ADMIN_PASSWORD", raising=False)
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    password = out.getvalue().split("password ")[-1].strip()
    assert User.objects.get(username="admin").check_password(password)


def test_production_refuses_the_development_secret_key(settings):
    from sessions_app.checks import check_production_settings

    settings.DEBUG = False
    settings.SECRET_KEY = settings.DEV_SECRET_KEY
    settings.PARLEY_WORKERS = 4
    settings.REDIS_URL = ""
    assert {e.id for e in check_production_settings()} == {"parley.E1", "parley.E2"}
    settings.SECRET_KEY = "a-real-secret"
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert check_production_settings() == []


def test_serving_refuses_a_stale_run_window_shorter_than_three_heartbeats(settings):
    settings.PARLEY_HEARTBEAT_INTERVAL = 10.0
    settings.PARLEY_STALE_RUN_AFTER = 25.0
    with pytest.raises(SystemCheckError, match=r"parley.E3.*shorter than three heartbeats"):
        call_command("check")
    settings.PARLEY_STALE_RUN_AFTER = 30.0  # three beats exactly
    call_command("check", stdout=StringIO())
    settings.PARLEY_HEARTBEAT_INTERVAL = 0.0
    with pytest.raises(SystemCheckError, match=r"parley.E4.*must be over 0"):
        call_command("check")


@pytest.mark.django_db
def test_healthz_reports_each_part(client, upstream, settings):
    assert client.get("/healthz").json() == {"db": "ok", "channel_layer": "ok", "llm": "ok"}
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert client.get("/healthz").json()["llm"] == "unreachable"


@pytest.mark.django_db
def test_healthz_says_a_model_endpoint_busy_answering_is_reachable(client, upstream):
    # A server that took the request and has not answered (llama.cpp generating for another
    # chat) is up; a closed port, in the test above, is not.
    upstream.hang_models = True
    assert client.get("/healthz").json()["llm"] == "ok"
    upstream.hang_models = False
    assert client.get("/healthz").json()["llm"] == "ok"


@pytest.mark.django_db(transaction=True)
def test_healthz_probes_the_model_at_most_once_per_period_however_many_ask(upstream, settings):
    # A period far longer than the hundred requests take, however loaded the machine.
    settings.PARLEY_HEALTHZ_CACHE_SECONDS = 60.0
    settings.LLM_BASE_URL = upstream.base_url + "/"  # the same server, not probed by this name yet

    async def fifty_at_once() -> list[dict]:
        client = ASGIClient()
        answers = await asyncio.gather(*(client.get("/healthz") for _ in range(50)))
        return [answer.json() for answer in answers]

    before = upstream.model_lists
    answers = async_to_sync(fifty_at_once)()
    answers += [Client().get("/healthz").json() for _ in range(50)]  # one by one, each its loop
    assert answers == [{"db": "ok", "channel_layer": "ok", "llm": "ok"}] * 100
    assert upstream.model_lists - before == 1

    # A short period, each request well after the last: each probes anew.
    settings.PARLEY_HEALTHZ_CACHE_SECONDS = 0.5
    for probes in (2, 3):
        time.sleep(1.5)
        assert Client().get("/healthz").json()["llm"] == "ok"
        assert upstream.model_lists - before == probes


@pytest.mark.parametrize(
    ("options", "expires_at"),
    [
        ([], None),
        (["--expires-in", "30"], timedelta(days=30)),  # from now
        (["--expires", "2999-12-30"], datetime(2999, 12, 31, tzinfo=UTC)),
    ],
)
def test_create_api_token_sets_an_expiry_and_still_prints_the_token_last(
    alice, options, expires_at
):
    out = StringIO()
    call_command("create_api_token", "alice", "--name", "ci", *options, stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    token = ApiToken.objects.get(user=alice)
    assert raw.startswith(token.prefix) and user_for_token(raw) == alice
    if expires_at is None:
        assert token.expires_at is None and "does not expire" in out.getvalue()
    else:
        if isinstance(expires_at, timedelta):
            expires_at = timezone.now() + expires_at
        assert abs(token.expires_at - expires_at) < timedelta(minutes=1)
        assert f"works until {token.expires_at:%Y-%m-%d %H:%M} UTC" in out.getvalue()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--expires", "2001-01-01"], "The expiry date must be today or later."),
        (["--expires", "next week"], "--expires takes a date as YYYY-MM-DD, not 'next week'."),
        (["--expires-in", "0"], "The number of days must be at least 1."),
    ],
)
def test_create_api_token_refuses_an_expiry_in_the_past_or_unreadable(alice, options, error):
    with pytest.raises(CommandError, match=re.escape(error)):
        call_command("create_api_token", "alice", *options, stdout=StringIO())
    assert not ApiToken.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_an_expired_token_cannot_start_a_run(alice, agent, upstream):
    out = StringIO()
    await sync_to_async(call_command)("create_api_token", "alice", "--expires-in", "1", stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    await ApiToken.objects.aupdate(expires_at=datetime(2026, 1, 5, tzinfo=UTC))
    response = await ASGIClient({"Authorization": f"Bearer {raw}"}).post(
        "/api/runs", {"input": "hi"}
    )
    assert response.status_code == 401
    assert response.json() == {"detail": "This token expired on 2026-01-05 00:00 UTC."}
    assert upstream.requests == []
