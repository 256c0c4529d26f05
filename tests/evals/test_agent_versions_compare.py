"""Two versions of an agent compared in the admin say which one users chat with (live) and
which are drafts, in the choices and above the differences."""

from __future__ import annotations

import re

import pytest

from sessions_app.models import Agent
from sessions_app.services import versions
from tests.evals import factories

pytestmark = pytest.mark.django_db


def compare(agent: Agent, a=None, b=None) -> str:
    query = f"?a={a.pk}&b={b.pk}" if a is not None and b is not None else ""
    return f"/admin/sessions_app/agent/{agent.pk}/versions/compare/{query}"


def states_line(shown: str) -> str:
    line = shown.split('data-testid="version-states">')[1].split("</p>")[0]
    return " ".join(re.sub(r"<[^>]+>", "", line).split())


def test_the_live_version_and_the_draft_are_named_as_such(root):
    agent, live, draft = factories.two_versions()

    shown = root.get(compare(agent, live, draft)).content.decode()

    assert states_line(shown) == (
        "v1 live · v2 draft. v1 is the live version: users chat with it. "
        "A draft is not used in chats until it is promoted."
    )
    options = re.findall(r"<option value=\"[^\"]+\"(?: selected)?>([^<]*)</option>", shown)
    assert options == ["v2 (draft)", "v1 (live)"] * 2
    assert "<th>v1 (live)</th><th>v2 (draft)</th>" in shown


def test_two_versions_neither_live_say_which_one_is(root, superuser):
    agent, first, _ = factories.two_versions()
    agent.instructions = "Be kind."
    agent.save()  # a second live configuration: v1 is past now, v3 live
    third = agent.versions.get(number=3)
    draft = versions.create_draft(agent, {"temperature": 0.2}, superuser)

    shown = root.get(compare(agent, first, draft)).content.decode()

    assert third.pk == Agent.objects.get(pk=agent.pk).live_version_id
    assert states_line(shown).startswith("v1 past · v4 draft. Neither is live: users chat with v3.")
