"""Session ids become text: sessions made before keep their ids, their URLs and every row that
points at them, on SQLite (UUIDs stored as 32 hex digits) and on PostgreSQL (uuid columns)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date

import pytest
from django.db import connection
from django.db.migrations.exceptions import IrreversibleError
from django.test import Client

from sessions_app.models import Session
from tests.support.migrating import latest, migrate, migrated

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("sessions_app", "0008_login_failures"), ("datasets_app", "0001_datasets")]
AFTER = [("sessions_app", "0009_session_string_ids"), ("datasets_app", "0002_session_string_ids")]


@pytest.fixture
def before_string_ids() -> Iterator[None]:
    with migrated(BEFORE):
        yield


def store_old_session(apps) -> uuid.UUID:
    """Alice's session as the old schema stored it: a run, its messages, a model call, a
    rolled-up day and a dataset item taken from it."""
    user = apps.get_model("sessions_app", "User").objects.create(
        username="alice", password="!", is_active=True
    )
    agent = apps.get_model("sessions_app", "Agent").objects.create(name="Assistant", model="m")
    session = apps.get_model("sessions_app", "Session").objects.create(
        user=user, agent=agent, session_name="Trip to Rome"
    )
    run = apps.get_model("sessions_app", "Run").objects.create(
        session=session, user=user, agent=agent, position=1, status="COMPLETED", input="hi"
    )
    message = apps.get_model("sessions_app", "Message")
    message.objects.create(run=run, session=session, order=0, role="user", content="hi")
    message.objects.create(run=run, session=session, order=1, role="assistant", content="hello")
    apps.get_model("sessions_app", "LLMCall").objects.create(
        run=run, session=session, user=user, agent=agent, model="m"
    )
    apps.get_model("sessions_app", "RunDay").objects.create(
        day=date(2026, 1, 2),
        session_id=session.session_id,
        user=user,
        agent=agent,
        status="COMPLETED",
        started=1,
    )
    dataset = apps.get_model("datasets_app", "Dataset").objects.create(name="good")
    apps.get_model("datasets_app", "DatasetItem").objects.create(
        dataset=dataset,
        source="session",
        source_session_id=session.session_id,
        owner=user,
        messages=[{"role": "user", "content": "hi"}],
    )
    return session.session_id


def stored_session_ids() -> dict[str, list[str]]:
    columns = {
        "sessions_app_session": "session_id",
        "sessions_app_run": "session_id",
        "sessions_app_message": "session_id",
        "sessions_app_llmcall": "session_id",
        "sessions_app_runday": "session_id",
        "datasets_app_datasetitem": "source_session_id",
    }
    with connection.cursor() as cursor:
        found = {}
        for table, column in columns.items():
            cursor.execute(f"SELECT {column} FROM {table}")
            found[table] = [str(value) for (value,) in cursor.fetchall()]
    return found


def test_old_sessions_keep_their_ids_urls_and_everything_pointing_at_them(before_string_ids):
    old_id = store_old_session(migrate(BEFORE))

    migrate(AFTER)

    dashed = str(old_id)
    assert stored_session_ids() == {
        "sessions_app_session": [dashed],
        "sessions_app_run": [dashed],
        "sessions_app_message": [dashed, dashed],
        "sessions_app_llmcall": [dashed],
        "sessions_app_runday": [dashed],
        "datasets_app_datasetitem": [dashed],
    }
    latest()
    session = Session.objects.get(pk=dashed)
    assert [m.content for m in session.messages.order_by("order")] == ["hi", "hello"]
    assert session.runs.get().llm_calls.count() == 1
    browser = Client()
    browser.force_login(session.user)
    page = browser.get(f"/s/{dashed}/")
    assert page.status_code == 200
    assert "Trip to Rome" in page.content.decode()


def test_the_change_can_be_undone_while_every_id_is_a_uuid(before_string_ids):
    old_id = store_old_session(migrate(BEFORE))
    migrate(AFTER)

    apps = migrate(BEFORE)

    session = apps.get_model("sessions_app", "Session").objects.get()
    assert session.session_id == old_id
    assert apps.get_model("sessions_app", "Run").objects.get().session_id == old_id
    item = apps.get_model("datasets_app", "DatasetItem").objects.get()
    assert item.source_session_id == old_id


def test_the_change_is_not_undone_while_a_chosen_id_exists(before_string_ids):
    store_old_session(migrate(BEFORE))
    apps = migrate(AFTER)
    old = apps.get_model("sessions_app", "Session").objects.get()
    chosen = "not-a-uuid-but-36-characters-long-ok"
    assert len(chosen) == 36
    apps.get_model("sessions_app", "Session").objects.create(
        session_id=chosen, user=old.user, agent=old.agent, session_name="Chosen"
    )
    before = stored_session_ids()

    with pytest.raises(IrreversibleError, match=f"such as '{chosen}'"):
        migrate(BEFORE)

    assert stored_session_ids() == before
