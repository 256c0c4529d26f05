"""Model calls stored before usage outlived sessions keep every row, and learn their run's id as
the plain value that keeps them counted once their session is deleted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessions_app.models import LLMCall, Message, Run, Session
from tests.support.apiclient import api_client
from tests.support.migrating import latest, migrated

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("sessions_app", "0011_agent_listed")]


@pytest.fixture
def old_schema() -> Iterator[object]:
    with migrated(BEFORE) as apps:
        yield apps


def test_calls_stored_before_are_kept_and_stay_counted_after_their_session_goes(old_schema):
    apps = old_schema
    user = apps.get_model("sessions_app", "User").objects.create(username="alice", password="!")
    agent = apps.get_model("sessions_app", "Agent").objects.create(name="Assistant", model="m")
    session = apps.get_model("sessions_app", "Session").objects.create(user=user, agent=agent)
    run = apps.get_model("sessions_app", "Run").objects.create(
        session=session, user=user, agent=agent, position=1, status="COMPLETED", input="hi"
    )
    apps.get_model("sessions_app", "Message").objects.create(
        run=run, session=session, order=0, role="user", content="hi"
    )
    calls = apps.get_model("sessions_app", "LLMCall").objects
    calls.create(run=run, session=session, user=user, agent=agent, model="m", total_tokens=12)
    calls.create(session=session, user=user, agent=agent, kind="title", model="m", total_tokens=3)

    latest()

    assert (Session.objects.count(), Run.objects.count(), Message.objects.count()) == (1, 1, 1)
    kept = dict(LLMCall.objects.values_list("kind", "run_uuid"))
    assert kept == {"chat": run.pk, "title": None}
    owner = type(Session.objects.get().user).objects.get()
    assert api_client(owner).delete(f"/api/sessions/{session.pk}").status_code == 204
    assert LLMCall.objects.filter(run__isnull=True, session__isnull=True).count() == 2
    body = api_client(owner).get("/api/metrics?group_by=user").json()["data"]
    assert (body[0]["total_tokens"], body[0]["runs"], body[0]["calls"]) == (15, 1, 2)
