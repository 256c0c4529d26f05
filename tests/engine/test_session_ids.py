"""Session ids chosen by the caller (as Agno's are): made through the API, used in URLs, runs,
the chat socket, the admin and datasets exactly like the server's own UUIDs."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.db import IntegrityError
from django.test import Client

from datasets_app.models import Dataset
from sessions_app.models import Session
from sessions_app.services.sessions import create_session
from testkit.upstream import Reply
from tests.support.apiclient import api_client, asgi_client, stored_run
from tests.support.asgiclient import ASGIClient
from tests.support.chattab import open_tab
from tests.support.roles import grant

pytestmark = pytest.mark.django_db(transaction=True)

CHOSEN = ["fixed_id_for_demo", "session_101", "team:42.a-b", "x" * 128]


def post_json(client: Client, path: str, body: dict) -> object:
    return client.post(path, json.dumps(body), content_type="application/json")


def test_a_new_session_without_a_chosen_id_gets_a_dashed_uuid(alice, agent):
    response = post_json(api_client(alice), "/api/sessions", {})
    assert response.status_code == 201
    session_id = response.json()["session_id"]
    assert str(uuid.UUID(session_id)) == session_id


@pytest.mark.parametrize("chosen", CHOSEN)
def test_a_chosen_id_is_kept_and_reached_like_any_other(alice, agent, chosen):
    client = api_client(alice)
    created = post_json(client, "/api/sessions", {"session_id": chosen, "session_name": "Demo"})
    assert created.status_code == 201
    assert created.json()["session_id"] == chosen
    assert client.get(f"/api/sessions/{chosen}").json()["session_name"] == "Demo"
    assert client.get(f"/api/sessions/{chosen}/runs").json()["meta"]["total_count"] == 0

    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/s/{chosen}/")
    assert page.status_code == 200
    assert f'data-session-id="{chosen}"' in page.content.decode()


def test_a_taken_id_answers_409_and_changes_nothing(alice, bob, agent):
    post_json(api_client(alice), "/api/sessions", {"session_id": "session_101"})
    taken = post_json(api_client(bob), "/api/sessions", {"session_id": "session_101"})
    assert taken.status_code == 409
    assert taken.json() == {"detail": "A session with this id exists already."}
    assert Session.objects.get(pk="session_101").user == alice


def test_a_failed_save_without_a_chosen_id_is_not_called_a_taken_id(django_user_model, agent):
    # The account went away between the request's login and the insert.
    gone = django_user_model.objects.create_user("gone", password="gone-pass-123")
    django_user_model.objects.filter(pk=gone.pk).delete()

    with pytest.raises(IntegrityError):
        create_session(gone, agent_id=agent.pk)
    with pytest.raises(IntegrityError):
        create_session(gone, agent_id=agent.pk, session_id="free_id")
    assert not Session.objects.exists()


@pytest.mark.parametrize("bad", ["has space", "", "x" * 129, "..", "é", "a/b", 7])
def test_an_id_outside_the_format_is_refused(alice, agent, bad):
    response = post_json(api_client(alice), "/api/sessions", {"session_id": bad})
    assert response.status_code == 422
    assert not Session.objects.exists()


@pytest.mark.parametrize("path", ["/api/sessions/{id}", "/api/sessions/{id}/messages"])
def test_someone_elses_malformed_or_missing_id_all_answer_404_alike(alice, bob, agent, path):
    Session.objects.create(session_id="fixed_id_for_demo", user=alice, agent=agent)
    client = api_client(bob)
    answers = [
        client.get(path.format(id=session_id))
        for session_id in ("fixed_id_for_demo", "nobody_has_this", "..", "a%20b", "x" * 129)
    ]
    assert {a.status_code for a in answers} == {404}
    assert {a.content for a in answers} == {b'{"detail": "Not found."}'}
    browser = Client()
    browser.force_login(bob)
    assert browser.get("/s/fixed_id_for_demo/").status_code == 404
    assert browser.get("/s/../").status_code == 404


@pytest.fixture
def as_alice(alice) -> ASGIClient:
    return asgi_client(alice)


async def test_runs_go_on_in_a_chosen_session_through_the_api_and_the_socket(
    alice, as_alice, agent, upstream
):
    client = as_alice
    created = await client.post("/api/sessions", {"session_id": "team:42.a-b"})
    assert created.status_code == 201
    upstream.script(Reply("First answer."), Reply("Second answer."))
    ran = await client.post("/api/runs", {"input": "first", "session_id": "team:42.a-b"})
    assert ran.status_code == 200
    assert ran.json()["session_id"] == "team:42.a-b"

    tab = await open_tab(alice)
    await tab.send(action="watch", session_id="team:42.a-b")
    await tab.until("First answer.")
    await tab.send(action="send", input="second", session_id="team:42.a-b")
    frame = ""
    while not ("Second answer." in frame and 'data-run-status="completed"' in frame):
        frame = await tab.ws.receive_from(timeout=10)
    await tab.close()
    runs = (await client.get("/api/sessions/team:42.a-b/runs")).json()["data"]
    assert [(r["input"], r["content"], r["status"]) for r in runs] == [
        ("first", "First answer.", "COMPLETED"),
        ("second", "Second answer.", "COMPLETED"),
    ]


def test_the_admin_finds_and_opens_a_session_by_a_chosen_id(django_user_model, alice, agent):
    session = Session.objects.create(session_id="team_3A_demo:1", user=alice, agent=agent)
    stored_run(session, "question", "answer")
    root = django_user_model.objects.create_superuser("root", password="root-pass-123")
    admin = Client()
    admin.force_login(root)
    listed = admin.get("/admin/sessions_app/session/", {"q": "team_3A_demo:1"}).content.decode()
    links = re.findall(r'href="(/admin/sessions_app/session/[^"]+/change/)', listed)
    assert len(links) == 1
    page = admin.get(links[0])
    assert page.status_code == 200
    assert "question" in page.content.decode()


def test_a_dataset_takes_a_session_by_its_chosen_id(django_user_model, alice, agent):
    session = Session.objects.create(session_id="fixed_id_for_demo", user=alice, agent=agent)
    stored_run(session, "question", "answer")
    staff = django_user_model.objects.create_user("boss", password="boss-pass-123", is_staff=True)
    grant(staff, "view_session", "add_datasetitem", "view_datasetitem")
    dataset = Dataset.objects.create(name="demos")
    client = api_client(staff)
    added = post_json(
        client, f"/api/datasets/{dataset.pk}/items", {"session_id": "fixed_id_for_demo"}
    )
    assert added.status_code == 201, added.content
    items = client.get(f"/api/datasets/{dataset.pk}/items").json()["data"]
    assert [item["session_id"] for item in items] == ["fixed_id_for_demo"]
