"""Parley as a process of its own, against private servers that the tests stop and restart."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import httpx

from testkit.parley import ParleyProcess
from testkit.upstream import ScriptedUpstream

PASSWORD = "alice-pass-123"


def parley_env(upstream: ScriptedUpstream, **settings: str) -> dict[str, str]:
    """Settings of a Parley process on the scripted model; no database or Redis of the suite's."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        LLM_BASE_URL=upstream.base_url,
        LLM_API_KEY="test-key",
        LLM_MODEL="scripted",
        PARLEY_GENERATE_TITLES="false",
        **settings,
    )
    return env


# Run by `manage.py shell`: the user alice and a token of hers, printed.
CREATE_ALICE = f"""
from sessions_app.models import User
from sessions_app.accounts import create_token
print(create_token(User.objects.create_user("alice", password="{PASSWORD}"))[1])
"""


def prepare(parley: ParleyProcess) -> dict[str, str]:
    """Its database migrated, with the user alice; headers that authenticate her."""
    parley.manage("migrate", "--noinput", "--verbosity", "0")
    token = parley.manage("shell", "-c", CREATE_ALICE).strip().splitlines()[-1]
    return {"Authorization": f"Bearer {token}"}


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict]]:
    """(event, data) of a run's event stream, as they come."""
    kind = ""
    for line in lines:
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


def api_client(parley: ParleyProcess, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(base_url=parley.url(), headers=headers, timeout=30)
