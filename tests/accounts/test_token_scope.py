"""Making a token that may use only some agents: `create_api_token --agent`, the tokens page, and
what the tokens page and the admin show of it."""

from __future__ import annotations

import re
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from sessions_app.accounts import create_token
from sessions_app.models import Agent, ApiToken, Session
from tests.conftest import ROOT, subprocess_env

pytestmark = pytest.mark.django_db


@pytest.fixture
def coder(db) -> Agent:
    return Agent.objects.create(name="Coder", model="scripted-coder")


@pytest.fixture
def hidden(db) -> Agent:
    """An unlisted agent (as an import brings): usable only by those with a session of it."""
    return Agent.objects.create(name="Imported", model="scripted", listed=False)


def agents_through(raw: str) -> list[str]:
    listed = Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/agents").json()
    return sorted(agent["name"] for agent in listed["data"])


# -- the command --------------------------------------------------------------------------------


def test_create_api_token_takes_agents_by_name_and_by_id(alice, agent, coder, hidden):
    Agent.objects.create(name="Writer", model="scripted")
    out = StringIO()
    call_command(
        "create_api_token", "alice", "--agent", "Coder", "--agent", str(agent.pk), stdout=out
    )
    lines = out.getvalue().strip().splitlines()
    assert "It may use only “Assistant”, “Coder”." in lines[0]
    token = ApiToken.objects.get(user=alice)
    assert token.scoped and set(token.agents.all()) == {agent, coder}
    assert agents_through(lines[-1]) == ["Assistant", "Coder"]


def test_create_api_token_without_agent_makes_a_token_for_every_agent(alice, agent, coder):
    out = StringIO()
    call_command("create_api_token", "alice", stdout=out)
    assert "may use only" not in out.getvalue()
    token = ApiToken.objects.get(user=alice)
    assert not token.scoped and not token.agents.exists()
    assert agents_through(out.getvalue().strip().splitlines()[-1]) == ["Assistant", "Coder"]


@pytest.mark.parametrize(
    ("named", "error"),
    [
        ("Nobody", "No agent named “Nobody” (agents: Assistant, Coder, Imported)."),
        ("Imported", "alice may not use the agent “Imported”."),
        ("Twin", "Several agents are named “Twin”; give one's id:"),
    ],
)
def test_create_api_token_refuses_an_unknown_or_forbidden_agent(
    alice, agent, coder, hidden, named, error
):
    if named == "Twin":
        Agent.objects.create(name="Twin", model="scripted")
        Agent.objects.create(name="Twin", model="scripted")
    with pytest.raises(CommandError, match=re.escape(error)):
        call_command("create_api_token", "alice", "--agent", "Coder", "--agent", named)
    assert not ApiToken.objects.exists()


def test_an_unlisted_agent_is_allowed_to_those_with_a_session_of_it(alice, bob, hidden):
    Session.objects.create(user=alice, agent=hidden)
    call_command("create_api_token", "alice", "--agent", "Imported", stdout=StringIO())
    assert list(ApiToken.objects.get(user=alice).agents.all()) == [hidden]
    with pytest.raises(CommandError, match=re.escape("bob may not use the agent “Imported”.")):
        call_command("create_api_token", "bob", "--agent", str(hidden.pk))


@pytest.mark.django_db(transaction=True)
def test_a_refused_agent_ends_the_command_with_an_error_status(alice, hidden):
    done = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "alice", "--agent", "Imported"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "alice may not use the agent “Imported”." in done.stderr
    assert "prl_" not in done.stdout
    assert not ApiToken.objects.exists()


# -- the tokens page ----------------------------------------------------------------------------


@pytest.fixture
def signed_in(alice) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    return client


def offered(page: str) -> dict[str, str]:
    """The agents the form offers: name by id."""
    select = re.search(r'<select name="agents"[^>]*>(.*?)</select>', page, re.S)
    assert select, "no agents field"
    return {pk: name for pk, name in re.findall(r'<option value="([^"]+)">([^<]+)<', select[1])}


def scope_cells(page: str) -> list[str]:
    cells = re.findall(r'<td data-testid="token-scope">(.*?)</td>', page, re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]


def test_the_form_offers_the_agents_one_may_use(signed_in, alice, bob, agent, coder, hidden):
    others = Agent.objects.create(name="Bob's import", model="scripted", listed=False)
    Session.objects.create(user=bob, agent=others)
    assert offered(signed_in.get("/tokens/").content.decode()) == {
        str(agent.pk): "Assistant",
        str(coder.pk): "Coder",
    }
    Session.objects.create(user=alice, agent=hidden)
    assert str(hidden.pk) in offered(signed_in.get("/tokens/").content.decode())


def test_a_token_for_some_agents_is_made_on_the_page(signed_in, alice, agent, coder):
    form = {"name": "ci", "agents": [str(coder.pk)]}
    assert signed_in.post("/tokens/", form).status_code == 403  # no CSRF token
    signed_in.get("/tokens/")
    form["csrfmiddlewaretoken"] = signed_in.cookies["csrftoken"].value
    page = signed_in.post("/tokens/", form, follow=True).content.decode()
    assert "It may use only Coder." in page
    raw = re.search(r'data-testid="new-token-value">([^<]+)<', page)[1]  # type: ignore[index]
    assert agents_through(raw) == ["Coder"]
    token = ApiToken.objects.get(user=alice)
    assert token.scoped and list(token.agents.all()) == [coder]
    assert scope_cells(page) == ["Coder"]


def test_the_list_tells_each_tokens_agents(signed_in, alice, agent, coder):
    spare = Agent.objects.create(name="Spare", model="scripted")
    create_token(alice, "everything")
    create_token(alice, "two", agents=[coder, agent])
    create_token(alice, "gone", agents=[spare])
    spare.delete()
    page = signed_in.get("/tokens/").content.decode()
    assert sorted(scope_cells(page)) == [
        "All agents",
        "Assistant, Coder",  # by name
        "none (its agents were deleted)",
    ]


def test_an_agent_one_may_not_use_is_refused_and_nothing_made(signed_in, alice, hidden):
    signed_in.get("/tokens/")
    form = {"agents": [str(hidden.pk)], "csrfmiddlewaretoken": signed_in.cookies["csrftoken"].value}
    response = signed_in.post("/tokens/", form)
    assert response.status_code == 200
    assert "Select a valid choice." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_agent_names_are_escaped(signed_in, alice):
    odd = Agent.objects.create(name="<b>Bold</b>", model="scripted")
    create_token(alice, "odd", agents=[odd])
    page = signed_in.get("/tokens/").content.decode()
    assert "<b>Bold</b>" not in page and "&lt;b&gt;Bold&lt;/b&gt;" in page


# -- the admin ----------------------------------------------------------------------------------


def test_the_admin_shows_each_tokens_agents(root, alice, agent, coder):
    limited, _ = create_token(alice, "limited", agents=[coder])
    create_token(alice, "everything")
    listing = root.get("/admin/sessions_app/apitoken/").content.decode()
    rows = dict(
        re.findall(
            r'<a href="[^"]*/(\d+)/change/">[^<]*</a>.*?field-scope">([^<]*)<', listing, re.S
        )
    )
    assert sorted(rows.values()) == ["All agents", "Coder"]
    page = root.get(f"/admin/sessions_app/apitoken/{limited.pk}/change/").content.decode()
    assert re.search(r"agents:?</label>\s*<div class=\"readonly\">Coder</div>", page, re.I)
