"""An agent's versions in the admin: listed on its page, compared two at a time, a draft made
from the live configuration and promoted, each with the right it takes; and the runs admin
showing and filtering by version."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from sessions_app.models import VERSIONED_FIELDS, Agent, AgentVersion, Run, Session
from sessions_app.services import versions
from tests.support.apiclient import stored_run

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('x')</script>"


class Marked(HTMLParser):
    """The elements of a page with a data-testid: their attributes and their text."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, Any]] = []
        self.open: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("input", "br", "img", "link", "meta"):
            return
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.open.append(element)
        if element["attrs"].get("data-testid"):
            self.found.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()["tag"] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element["text"] += data


def marked(response: Any, testid: str) -> list[dict[str, Any]]:
    parser = Marked()
    parser.feed(response.content.decode())
    return [e for e in parser.found if e["attrs"]["data-testid"] == testid]


def words(text: str) -> str:
    return " ".join(text.split())


def client_for(user: Any, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def coder(manager) -> Agent:
    """An agent of two versions, the first with a run, the second made by the manager."""
    agent = Agent.objects.create(name="Coder", model="scripted", instructions="Write code.")
    session = Session.objects.create(user=manager, agent=agent)
    run = stored_run(session, "a question", "an answer")
    Run.objects.filter(pk=run.pk).update(agent_version=agent.live_version)
    agent.instructions = "Write tested code."
    versions.save_agent(agent, manager)
    return agent


def page_url(agent: Agent, rest: str = "change/") -> str:
    return f"/admin/sessions_app/agent/{agent.pk}/{rest}"


def form_data(agent: Agent, **changes: Any) -> dict[str, Any]:
    """The versioned fields of the agent as its form posts them, with `changes`."""
    values = {name: getattr(agent, name) for name in VERSIONED_FIELDS} | changes
    data = {}
    for name, value in values.items():
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, dict):
            data[name] = json.dumps(value)
        elif name == "fewshot_dataset":
            data[name] = value.pk if value else ""
        else:
            data[name] = "" if value is None else value
    return data


# -- the agent's page ---------------------------------------------------------------------------


def test_an_agents_page_lists_its_versions_newest_first(root, coder, manager):
    versions.create_draft(coder, {"temperature": 0.7}, manager, "warmer")

    rows = marked(root.get(page_url(coder)), "agent-version")

    assert [(r["attrs"]["data-version"], r["attrs"]["data-state"]) for r in rows] == [
        ("3", "draft"),
        ("2", "live"),
        ("1", "past"),
    ]
    draft, live, first = (words(r["text"]) for r in rows)
    assert "manager" in draft and "warmer" in draft and draft.endswith("0 changes Promote…")
    assert "manager" in live and live.endswith("0 changes")
    assert first.endswith("1")  # its run; nobody is on record for a version made by a save


def test_a_version_made_in_the_admin_is_put_down_to_who_saved_it(root, superuser, coder):
    data = form_data(coder, temperature="0.4") | {"name": "Coder", "listed": "on"}
    response = root.post(page_url(coder), data)
    assert response.status_code == 302, response.content[:2000]

    coder.refresh_from_db()
    assert coder.temperature == 0.4
    assert (coder.live_version.number, coder.live_version.created_by) == (3, superuser)


def test_the_agent_form_offers_the_sampling_settings(root, coder):
    page = root.get(page_url(coder)).content.decode()
    for name in ("temperature", "top_p", "max_tokens"):
        assert f'name="{name}"' in page
    assert "Sampling" in page


def test_the_runs_of_a_version_are_one_click_away(root, coder):
    counts = marked(root.get(page_url(coder)), "version-runs")
    assert [link["text"] for link in counts] == ["0", "1"]

    listed = root.get(counts[1]["attrs"]["href"]).content.decode()

    assert "a question" in listed and "1 run" in listed


# -- comparing ----------------------------------------------------------------------------------


def test_two_versions_compare_field_by_field(root, coder, manager):
    first = coder.versions.get(number=1)
    draft = versions.create_draft(coder, {"temperature": 0.7, "num_history_runs": 5}, manager)

    response = root.get(page_url(coder, f"versions/compare/?a={first.pk}&b={draft.pk}"))

    fields = {r["attrs"]["data-field"]: words(r["text"]) for r in marked(response, "diff-field")}
    assert list(fields) == ["instructions", "num_history_runs", "temperature"]
    assert fields["temperature"] == "temperature not set 0.7"
    assert fields["num_history_runs"] == "num_history_runs 3 5"


def test_long_instructions_are_a_line_diff_shown_as_text(root, coder, manager):
    before = "\n".join(f"Rule {n}." for n in range(1, 11))
    after = before.replace("Rule 5.", f"Rule 5, {SCRIPT}")
    coder.instructions = before
    coder.save()
    draft = versions.create_draft(coder, {"instructions": after}, manager)

    response = root.get(
        page_url(coder, f"versions/compare/?a={coder.live_version_id}&b={draft.pk}")
    )

    page = response.content.decode()
    assert SCRIPT not in page
    assert "Rule 5, &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    lines = re.findall(r'<span class="line-(\w+)">(.*?)</span>', page)
    changed = [(kind, text.strip()) for kind, text in lines if kind in ("added", "removed")]
    assert changed == [
        ("removed", "- Rule 5."),
        ("added", "+ Rule 5, &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"),
    ]
    # Three lines of context each side, not the whole text.
    assert "Rule 1." not in page.split("version-diff")[1] and "Rule 10." not in page


def test_the_compare_page_defaults_to_the_newest_two(root, coder):
    response = root.get(page_url(coder, "versions/compare/"))
    assert [r["attrs"]["data-field"] for r in marked(response, "diff-field")] == ["instructions"]
    assert "From v1 to v2" in response.content.decode()


# -- drafts and promotion -----------------------------------------------------------------------


def test_the_draft_form_starts_from_the_live_configuration(root, coder):
    page = root.get(page_url(coder, "versions/new/")).content.decode()
    assert re.search(r'name="instructions"[^>]*>\s*Write tested code.</textarea>', page)
    assert 'name="note"' in page and 'name="name"' not in page


def test_a_draft_saved_in_the_admin_leaves_the_agent_as_it_was(root, superuser, coder):
    data = form_data(coder, instructions="Write short code.", top_p="0.5") | {"note": "terse"}

    response = root.post(page_url(coder, "versions/new/"), data)

    assert response.status_code == 302
    assert response["Location"] == page_url(coder) + "#versions"
    draft = coder.versions.get(number=3)
    assert (draft.is_draft, draft.note, draft.created_by) == (True, "terse", superuser)
    assert (draft.config["instructions"], draft.config["top_p"]) == ("Write short code.", 0.5)
    fresh = Agent.objects.get(pk=coder.pk)
    assert (fresh.instructions, fresh.top_p, fresh.live_version_id) == (
        "Write tested code.",
        None,
        coder.live_version_id,
    )


def test_a_draft_with_a_value_out_of_bounds_is_shown_back_with_why(root, coder):
    response = root.post(page_url(coder, "versions/new/"), form_data(coder, temperature="3"))
    assert response.status_code == 200
    assert "Ensure this value is less than or equal to 2.0." in response.content.decode()
    assert not coder.versions.filter(is_draft=True).exists()


def test_promoting_asks_first_then_the_draft_goes_live(manager, coder):
    draft = versions.create_draft(coder, {"temperature": 0.7}, manager)
    client = client_for(manager, enforce_csrf_checks=True)
    url = page_url(coder, f"versions/{draft.pk}/promote/")

    asked = client.get(url)
    assert [r["attrs"]["data-field"] for r in marked(asked, "diff-field")] == ["temperature"]
    assert client.post(url).status_code == 403  # no CSRF token
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', asked.content.decode())
    promoted = client.post(url, {"csrfmiddlewaretoken": token.group(1)})

    assert promoted.status_code == 302
    coder.refresh_from_db()
    assert (coder.live_version_id, coder.temperature) == (draft.pk, 0.7)
    assert not AgentVersion.objects.get(pk=draft.pk).is_draft


def test_staff_who_may_only_view_agents_compare_but_neither_draft_nor_promote(
    support, manager, coder
):
    draft = versions.create_draft(coder, {"temperature": 0.7}, manager)
    client = client_for(support)
    promote = page_url(coder, f"versions/{draft.pk}/promote/")

    page = client.get(page_url(coder))
    assert client.get(page_url(coder, "versions/compare/")).status_code == 200
    assert client.get(page_url(coder, "versions/new/")).status_code == 403
    assert client.post(page_url(coder, "versions/new/"), form_data(coder)).status_code == 403
    assert (client.get(promote).status_code, client.post(promote).status_code) == (403, 403)
    assert marked(page, "agent-version") and not marked(page, "promote")
    assert not marked(page, "new-draft")
    coder.refresh_from_db()
    assert coder.temperature is None and coder.versions.count() == 3


# -- the runs admin -----------------------------------------------------------------------------


def test_a_run_page_shows_its_version_and_runs_filter_by_version(root, coder, manager):
    session = Session.objects.create(user=manager, agent=coder)
    later = stored_run(session, "second question", "second answer")
    Run.objects.filter(pk=later.pk).update(agent_version=coder.live_version)

    page = root.get(f"/admin/sessions_app/run/{later.pk}/change/").content.decode()
    assert f'<a href="{page_url(coder)}#versions">v2</a>' in page
    listed = root.get(f"/admin/sessions_app/run/?agent_version={coder.live_version_id}")
    assert "second question" in listed.content.decode()
    assert "a question" not in listed.content.decode().replace("second question", "")
