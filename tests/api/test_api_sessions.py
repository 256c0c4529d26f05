"""The sessions API: lists, one session, its runs and messages, as owner, stranger and staff
(as far as their permissions go)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Agent, Run, RunStatus, Session
from tests.support.apiclient import api_client, stored_run

pytestmark = pytest.mark.django_db

SESSION_FIELDS = {
    "session_id",
    "session_type",
    "agent_id",
    "user_id",
    "session_name",
    "session_state",
    "metadata",
    "summary",
    "metrics",
    "created_at",
    "updated_at",
}


@pytest.fixture
def alices(alice, agent) -> Session:
    """Alice's session with two finished runs."""
    session = Session.objects.create(user=alice, agent=agent, session_name="Trip to Rome")
    stored_run(session, "first question", "first answer", tokens=(10, 5))
    stored_run(session, "second question", "second answer", tokens=(20, 7))
    return session


def post_json(client: Client, path: str, body: dict, **extra) -> object:
    return client.post(path, json.dumps(body), content_type="application/json", **extra)


def call(client: Client, method: str, path: str, body: dict | None = None) -> object:
    data = json.dumps(body or {}) if method != "get" else ""
    return client.generic(method.upper(), path, data, content_type="application/json")


def patch_json(client: Client, path: str, body: dict) -> object:
    return client.patch(path, json.dumps(body), content_type="application/json")


# -- who may see what --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/api/sessions"),
        ("post", "/api/sessions"),
        ("get", "/api/sessions/{id}"),
        ("patch", "/api/sessions/{id}"),
        ("delete", "/api/sessions/{id}"),
        ("get", "/api/sessions/{id}/runs"),
        ("get", "/api/sessions/{id}/messages"),
    ],
)
def test_anonymous_callers_get_401_everywhere(client, alices, method, path):
    response = call(client, method, path.format(id=alices.session_id))
    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication required: a Bearer token or a session."}
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_wrong_token_is_refused(client, alices):
    response = client.get("/api/sessions", headers={"Authorization": "Bearer prl_nope"})
    assert response.status_code == 401


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/api/sessions/{id}"),
        ("patch", "/api/sessions/{id}"),
        ("delete", "/api/sessions/{id}"),
        ("get", "/api/sessions/{id}/runs"),
        ("get", "/api/sessions/{id}/messages"),
    ],
)
def test_it_rejects_other_users_session_exactly_like_a_missing_one(bob, alices, method, path):
    client = api_client(bob)
    other = call(client, method, path.format(id=alices.session_id))
    missing = call(client, method, path.format(id=uuid.uuid4()))
    assert other.status_code == missing.status_code == 404
    assert other.json() == missing.json() == {"detail": "Not found."}
    assert Session.objects.filter(pk=alices.pk, session_name="Trip to Rome").exists()


def test_staff_who_may_view_sessions_read_anyones_session_its_runs_and_messages(support, alices):
    client = api_client(support)
    base = f"/api/sessions/{alices.session_id}"
    assert client.get(base).json()["user_id"] == "alice"
    assert client.get(f"{base}/runs").json()["meta"]["total_count"] == 2
    assert client.get(f"{base}/messages").json()["meta"]["total_count"] == 4


@pytest.mark.parametrize(
    "method,path,right",
    [
        ("get", "/api/sessions/{id}", "view session"),
        ("get", "/api/sessions/{id}/runs", "view session"),
        ("get", "/api/sessions/{id}/messages", "view session"),
        ("patch", "/api/sessions/{id}", "change session"),
        ("delete", "/api/sessions/{id}", "delete session"),
    ],
)
def test_staff_without_the_permission_get_403_naming_it(staff, alices, method, path, right):
    """The fixture's staff member may view runs and model calls, nothing of sessions; a missing
    session answers the same, as in the admin."""
    client = api_client(staff)
    refused = call(client, method, path.format(id=alices.session_id), {"session_name": "x"})
    missing = call(client, method, path.format(id=uuid.uuid4()), {"session_name": "x"})
    assert refused.status_code == missing.status_code == 403
    assert refused.json() == missing.json() == {"detail": f"You need the “{right}” permission."}
    assert Session.objects.filter(pk=alices.pk, session_name="Trip to Rome").exists()


def test_view_only_staff_may_neither_delete_nor_change_a_session(support, alices):
    client = api_client(support)
    base = f"/api/sessions/{alices.session_id}"
    deleted = call(client, "delete", base)
    assert deleted.status_code == 403
    assert deleted.json() == {"detail": "You need the “delete session” permission."}
    changes = {"session_name": "Mine now", "session_state": {"x": 1}, "metadata": {"y": 2}}
    changed = patch_json(client, base, changes)
    assert changed.status_code == 403
    assert changed.json() == {"detail": "You need the “change session” permission."}
    alices.refresh_from_db()
    assert (alices.session_name, alices.session_state, alices.metadata) == ("Trip to Rome", {}, {})
    assert Run.objects.filter(session=alices).count() == 2


def test_staff_with_the_permissions_change_and_delete_anyones_session(manager, alices):
    client = api_client(manager)
    base = f"/api/sessions/{alices.session_id}"
    assert patch_json(client, base, {"session_name": "Checked"}).json()["session_name"] == "Checked"
    assert call(client, "delete", base).status_code == 204
    assert not Session.objects.filter(pk=alices.pk).exists()


# -- one session -------------------------------------------------------------------------------


def test_the_owner_sees_a_session_with_the_contract_fields_and_summed_metrics(alice, alices):
    body = api_client(alice).get(f"/api/sessions/{alices.session_id}").json()
    assert set(body) == SESSION_FIELDS
    assert body["session_id"] == str(alices.session_id)
    assert body["session_type"] == "agent"
    assert body["user_id"] == "alice"
    assert body["agent_id"] == str(alices.agent_id)
    assert body["metrics"]["input_tokens"] == 30
    assert body["metrics"]["output_tokens"] == 12
    assert body["metrics"]["total_tokens"] == 42
    assert body["metrics"]["duration"] == pytest.approx(1.0)
    assert body["metrics"]["cost"] is None
    assert body["created_at"].endswith("Z") or "+" in body["created_at"]


def test_creating_a_session_answers_201_and_starts_from_the_agents_state(alice, agent):
    Agent.objects.filter(pk=agent.pk).update(session_state={"lang": "en", "level": 1})
    response = post_json(
        api_client(alice),
        "/api/sessions",
        {"session_name": "  Notes  ", "session_state": {"level": 2}, "metadata": {"k": "v"}},
    )
    assert response.status_code == 201
    body = response.json()
    assert body["session_name"] == "Notes"
    assert body["session_state"] == {"lang": "en", "level": 2}
    assert body["metadata"] == {"k": "v"}
    assert body["agent_id"] == str(agent.agent_id)
    assert body["metrics"]["total_tokens"] == 0
    assert Session.objects.get(pk=body["session_id"]).user == alice


def test_creating_a_session_with_an_unknown_agent_is_not_found(alice, agent):
    response = post_json(api_client(alice), "/api/sessions", {"agent_id": str(uuid.uuid4())})
    assert response.status_code == 404
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"session_name": "x" * 201},
        {"session_name": "nul\x00byte"},
        {"session_state": ["not", "an", "object"]},
        {"metadata": {"k": "nul\x00"}},
        {"agent_id": "not-a-uuid"},
    ],
)
def test_invalid_session_fields_answer_422_with_details(alice, agent, body):
    response = post_json(api_client(alice), "/api/sessions", body)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)
    assert not Session.objects.exists()


def test_the_owner_renames_and_updates_a_session_field_by_field(alice, alices):
    client = api_client(alice)
    path = f"/api/sessions/{alices.session_id}"
    response = patch_json(client, path, {"session_name": "Trip to Naples"})
    assert response.status_code == 200
    assert response.json()["session_name"] == "Trip to Naples"
    response = patch_json(client, path, {"metadata": {"pinned": True}})
    assert response.json()["metadata"] == {"pinned": True}
    assert response.json()["session_name"] == "Trip to Naples"  # unsent fields are kept
    alices.refresh_from_db()
    assert (alices.session_name, alices.metadata) == ("Trip to Naples", {"pinned": True})


@pytest.mark.parametrize("body", [{"session_state": None}, {"session_name": None}])
def test_patching_a_field_to_null_is_refused(alice, alices, body):
    response = patch_json(api_client(alice), f"/api/sessions/{alices.session_id}", body)
    assert response.status_code == 422


def test_deleting_a_session_answers_204_and_then_404(alice, alices):
    client = api_client(alice)
    path = f"/api/sessions/{alices.session_id}"
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert not Run.objects.filter(session_id=alices.session_id).exists()


def test_a_session_with_a_run_in_progress_cannot_be_deleted(alice, alices):
    Run.objects.create(
        session=alices, user=alice, agent=alices.agent, position=3, input="busy",
        status=RunStatus.RUNNING,
    )  # fmt: skip
    response = api_client(alice).delete(f"/api/sessions/{alices.session_id}")
    assert response.status_code == 409
    assert "in progress" in response.json()["detail"]
    assert Session.objects.filter(pk=alices.pk).exists()


# -- runs and messages of a session ------------------------------------------------------------


def test_a_sessions_runs_come_oldest_first_with_their_metrics(alice, alices):
    body = api_client(alice).get(f"/api/sessions/{alices.session_id}/runs").json()
    assert [run["input"] for run in body["data"]] == ["first question", "second question"]
    first = body["data"][0]
    assert first["user_id"] == "alice"
    assert first["status"] == "COMPLETED"
    assert first["metrics"]["total_tokens"] == 15
    assert first["metrics"]["tokens_per_second"] == pytest.approx(5 / 0.4)
    assert first["feedback"] is None
    newest = api_client(alice).get(f"/api/sessions/{alices.session_id}/runs?sort_order=desc")
    assert [r["input"] for r in newest.json()["data"]] == ["second question", "first question"]


def test_a_sessions_messages_come_in_conversation_order(alice, alices):
    body = api_client(alice).get(f"/api/sessions/{alices.session_id}/messages").json()
    assert [(m["role"], m["content"]) for m in body["data"]] == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
        ("assistant", "second answer"),
    ]
    assert {m["from_history"] for m in body["data"]} == {False}
    assert set(body["data"][0]) == {
        "id", "run_id", "role", "content", "tool_calls", "tool_call_id", "from_history",
        "created_at",
    }  # fmt: skip


# -- the list ----------------------------------------------------------------------------------


def make_sessions(user, agent, names: list[str]) -> list[Session]:
    return [Session.objects.create(user=user, agent=agent, session_name=n) for n in names]


def test_the_list_holds_only_ones_own_sessions_newest_first(alice, bob, agent):
    make_sessions(alice, agent, ["a1", "a2"])
    make_sessions(bob, agent, ["b1"])
    body = api_client(alice).get("/api/sessions").json()
    assert [s["session_name"] for s in body["data"]] == ["a2", "a1"]
    assert body["meta"] == {"page": 1, "limit": 20, "total_pages": 1, "total_count": 2}
    assert set(body["data"][0]) == SESSION_FIELDS


def test_staff_list_another_users_sessions_by_username(support, alice, bob, agent):
    make_sessions(alice, agent, ["a1"])
    make_sessions(bob, agent, ["b1", "b2"])
    body = api_client(support).get("/api/sessions?user_id=bob").json()
    assert {s["session_name"] for s in body["data"]} == {"b1", "b2"}
    assert {s["user_id"] for s in body["data"]} == {"bob"}
    assert api_client(support).get("/api/sessions").json()["meta"]["total_count"] == 0


def test_staff_who_may_not_view_sessions_cannot_list_another_users(staff, bob, agent):
    make_sessions(bob, agent, ["b1"])
    response = api_client(staff).get("/api/sessions?user_id=bob")
    assert response.status_code == 403
    assert response.json() == {"detail": "You need the “view session” permission."}
    assert api_client(staff).get("/api/sessions?user_id=staff").status_code == 200


def test_a_non_staff_user_id_filter_still_lists_only_ones_own(alice, bob, agent):
    make_sessions(alice, agent, ["a1"])
    make_sessions(bob, agent, ["b1"])
    body = api_client(bob).get("/api/sessions?user_id=alice").json()
    assert [s["session_name"] for s in body["data"]] == ["b1"]


def test_the_list_filters_by_agent_and_by_part_of_the_name(alice, agent):
    other_agent = Agent.objects.create(name="Coder", model="scripted")
    make_sessions(alice, agent, ["Rome trip", "Groceries"])
    Session.objects.create(user=alice, agent=other_agent, session_name="Rome code")
    client = api_client(alice)
    by_name = client.get("/api/sessions?session_name=rOmE").json()["data"]
    assert {s["session_name"] for s in by_name} == {"Rome trip", "Rome code"}
    by_agent = client.get(f"/api/sessions?agent_id={other_agent.agent_id}").json()["data"]
    assert [s["session_name"] for s in by_agent] == ["Rome code"]


def test_the_list_sorts_by_whitelisted_fields_only(alice, agent):
    make_sessions(alice, agent, ["b", "c", "a"])
    client = api_client(alice)
    names = client.get("/api/sessions?sort_by=session_name&sort_order=asc").json()["data"]
    assert [s["session_name"] for s in names] == ["a", "b", "c"]
    created = client.get("/api/sessions?sort_by=created_at&sort_order=asc").json()["data"]
    assert [s["session_name"] for s in created] == ["b", "c", "a"]
    assert client.get("/api/sessions?sort_by=user__password").status_code == 422
    assert client.get("/api/sessions?sort_order=sideways").status_code == 422


def test_a_parameter_given_twice_is_refused_rather_than_half_read(alice, agent):
    make_sessions(alice, agent, ["a", "b"])
    client = api_client(alice)
    response = client.get("/api/sessions?sort_order=asc&sort_order=desc")
    assert response.status_code == 422
    assert [error["loc"][-1] for error in response.json()["detail"]] == ["sort_order"]
    assert client.get("/api/sessions?user_id=alice&user_id=bob").status_code == 422
    assert client.get("/api/sessions?limit=1&limit=2").status_code == 422
    # Once each, the same parameters are read as ever.
    one = client.get("/api/sessions?sort_order=asc&limit=1&user_id=alice").json()["data"]
    assert [s["session_name"] for s in one] == ["a"]


def test_pages_cover_the_list_and_a_page_past_the_end_is_empty(alice, agent):
    make_sessions(alice, agent, ["s1", "s2", "s3", "s4", "s5"])
    client = api_client(alice)
    pages = [client.get(f"/api/sessions?limit=2&page={n}").json() for n in (1, 2, 3, 4)]
    names = [[s["session_name"] for s in page["data"]] for page in pages]
    assert names == [["s5", "s4"], ["s3", "s2"], ["s1"], []]
    for n, page in enumerate(pages, start=1):
        assert page["meta"] == {"page": n, "limit": 2, "total_pages": 3, "total_count": 5}


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "page=0", "page=-1", "limit=x"])
def test_out_of_range_paging_answers_422(alice, agent, query):
    response = api_client(alice).get(f"/api/sessions?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "query"


def test_an_empty_list_has_zero_pages(alice, agent):
    body = api_client(alice).get("/api/sessions?limit=100").json()
    assert body == {
        "data": [],
        "meta": {"page": 1, "limit": 100, "total_pages": 0, "total_count": 0},
    }


def test_the_list_costs_the_same_queries_for_3_or_30_sessions_with_runs(alice, agent):
    client = api_client(alice)
    client.get("/api/sessions")  # first-use queries aside

    def queries_for(count: int) -> int:
        for session in make_sessions(alice, agent, [f"s{i}" for i in range(count)]):
            stored_run(session, "q", "a", tokens=(3, 4))
        with CaptureQueriesContext(connection) as captured:
            body = client.get("/api/sessions?limit=100").json()
        assert all(s["metrics"]["total_tokens"] == 7 for s in body["data"])
        return len(captured)

    few = queries_for(3)
    many = queries_for(27)
    assert few == many <= 5


# -- CSRF --------------------------------------------------------------------------------------


@pytest.fixture
def signed_in(alice) -> Client:
    """A signed-in browser that enforces CSRF as a real one would be held to."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/tokens/")  # any page with a form sets the CSRF cookie
    return client


def test_a_cookie_authenticated_write_without_the_csrf_token_is_refused(signed_in, agent):
    response = post_json(signed_in, "/api/sessions", {"session_name": "forged"})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not Session.objects.exists()


def test_a_cookie_authenticated_write_with_the_csrf_token_works(signed_in, agent):
    token = signed_in.cookies["csrftoken"].value
    response = post_json(
        signed_in, "/api/sessions", {"session_name": "mine"}, headers={"X-CSRFToken": token}
    )
    assert response.status_code == 201


def test_cookie_authenticated_reads_need_no_csrf_token(signed_in, alices):
    assert signed_in.get("/api/sessions").status_code == 200


def test_a_bearer_token_needs_no_csrf_token(alice, agent):
    from tests.support.apiclient import bearer

    client = Client(enforce_csrf_checks=True, headers=bearer(alice))
    assert post_json(client, "/api/sessions", {"session_name": "script"}).status_code == 201
