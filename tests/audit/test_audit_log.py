"""The audit log: staff reading someone else's conversation (API and admin), and rights changed
in the admin, are on the record; the record is read in the admin and changed by no one."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.test import Client

from audit_app.models import Action, AuditEntry
from sessions_app.models import LLMCall, Message, Session
from tests.support.apiclient import stored_run
from tests.support.roles import grant

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def conversation(alice, agent):
    session = Session.objects.create(user=alice, agent=agent, session_name="private matters")
    run = stored_run(session, "a secret", "noted")
    message = Message.objects.get(run=run, order=0)
    return session, run, message, LLMCall.objects.get(run=run)


def test_staff_reading_a_transcript_through_the_api_is_recorded(staff, alice, conversation):
    session, run, *_ = conversation
    grant(staff, "view_session")
    client = signed_in(staff)
    assert client.get(f"/api/sessions/{session.pk}/messages").status_code == 200
    assert client.get(f"/api/runs/{run.pk}").status_code == 200
    entries = list(AuditEntry.objects.order_by("pk"))
    assert [(e.action, e.actor_id, e.subject_id) for e in entries] == [
        (Action.TRANSCRIPT_READ, staff.pk, alice.pk)
    ] * 2
    assert entries[0].object_type == "sessions_app.Session"
    assert entries[0].object_id == session.pk
    # Names things by id, never by what the person wrote.
    assert "private" not in entries[0].summary and "secret" not in entries[1].summary


def test_a_person_reading_their_own_sessions_is_not_recorded(alice, conversation):
    session, *_ = conversation
    assert signed_in(alice).get(f"/api/sessions/{session.pk}/messages").status_code == 200
    assert not AuditEntry.objects.exists()


def test_opening_someone_elses_records_in_the_admin_is_recorded(
    root, superuser, alice, conversation
):
    session, run, message, call = conversation
    for model, obj in [("session", session), ("run", run), ("message", message), ("llmcall", call)]:
        page = root.get(f"/admin/sessions_app/{model}/{obj.pk}/change/")
        assert page.status_code == 200
    entries = AuditEntry.objects.order_by("pk")
    assert [e.object_type for e in entries] == [
        "sessions_app.Session", "sessions_app.Run", "sessions_app.Message", "sessions_app.LLMCall"
    ]  # fmt: skip
    assert {(e.actor_id, e.subject_id) for e in entries} == {(superuser.pk, alice.pk)}
    # The lists show excerpts, not a transcript: not recorded.
    root.get("/admin/sessions_app/session/")
    assert AuditEntry.objects.count() == 4


def test_rights_changed_in_the_admin_are_recorded(root, superuser, alice):
    page = root.get(f"/admin/sessions_app/user/{alice.pk}/change/")
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k != "password"}
    data.update(
        {
            "is_staff": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
            "groups": [],
            "user_permissions": [],
        }
    )
    data.pop("date_joined", None)
    data.pop("last_login", None)
    assert root.post(f"/admin/sessions_app/user/{alice.pk}/change/", data).status_code == 302
    team = {"name": "team", "permissions": [Permission.objects.get(codename="view_run").pk]}
    assert root.post("/admin/auth/group/add/", team).status_code == 302
    entries = list(AuditEntry.objects.filter(action=Action.PERMISSION).order_by("pk"))
    assert entries[0].subject_id == alice.pk and "Staff status" in entries[0].summary
    assert entries[1].summary == f"Added group #{Group.objects.get().pk}"
    assert all(e.actor_id == superuser.pk for e in entries)
    assert "alice" not in entries[0].summary


def test_the_log_is_read_in_the_admin_and_changed_by_no_one(root, staff, alice, conversation):
    grant(staff, "view_session")
    signed_in(staff).get(f"/api/sessions/{conversation[0].pk}")
    entry = AuditEntry.objects.get()
    listing = root.get("/admin/audit_app/auditentry/").content.decode()
    assert "Read another person&#x27;s transcript" in listing
    assert root.get("/admin/audit_app/auditentry/add/").status_code == 403
    page = root.get(f"/admin/audit_app/auditentry/{entry.pk}/change/").content.decode()
    assert 'type="submit"' not in page.split('id="auditentry_form"')[-1].split("</form>")[0]
    posted = root.post(f"/admin/audit_app/auditentry/{entry.pk}/change/", {"summary": "x"})
    assert posted.status_code == 403
    assert (
        root.post(f"/admin/audit_app/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert AuditEntry.objects.get().summary == entry.summary


def test_exports_are_recorded(root, superuser, alice, conversation):
    from datasets_app.models import Dataset

    dataset = Dataset.objects.create(name="answers")
    got = root.get(f"/api/datasets/{dataset.pk}/export?format=openai-chat&redact=true")
    assert got.status_code == 200
    session = conversation[0]
    form = {"action": "export_sessions_json", "_selected_action": [session.pk]}
    assert root.post("/admin/sessions_app/session/", form).status_code == 200
    call_command(
        "export_dataset",
        "--dataset",
        "answers",
        "--format",
        "csv",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    entries = list(AuditEntry.objects.filter(action=Action.EXPORT).order_by("pk"))
    assert [(e.actor_id, e.summary) for e in entries] == [
        (superuser.pk, f"Exported dataset {dataset.pk} as openai-chat"),
        (superuser.pk, "Exported 1 sessions as JSON"),
        (None, f"Exported dataset {dataset.pk} as csv"),
    ]
    assert entries[0].details["redact"] is True
    assert entries[1].subject_id == alice.pk


def test_deleting_several_budgets_at_once_in_the_admin_is_recorded(root, superuser, alice, bob):
    from budgets_app.models import Budget

    budgets = [
        Budget.objects.create(user=person, measure="runs", period="day", limit=5, note="private")
        for person in (alice, bob)
    ]
    form = {"action": "delete_selected", "_selected_action": [b.pk for b in budgets]}
    assert root.post("/admin/budgets_app/budget/", {**form, "post": "yes"}).status_code == 302
    assert not Budget.objects.exists()
    entries = AuditEntry.objects.filter(action=Action.BUDGET).order_by("subject_id")
    assert [(e.actor_id, e.subject_id, e.summary) for e in entries] == [
        (superuser.pk, alice.pk, f"Deleted budget #{budgets[0].pk}"),
        (superuser.pk, bob.pk, f"Deleted budget #{budgets[1].pk}"),
    ]
    assert all(e.details["through_admin"] for e in entries)


def test_a_budgets_note_is_not_copied_into_the_log(root, alice):
    form = {"user": alice.pk, "measure": "runs", "period": "day", "limit": "5", "note": "alice!"}
    assert root.post("/admin/budgets_app/budget/add/", form).status_code == 302
    entry = AuditEntry.objects.get(action=Action.BUDGET)
    assert "note" not in entry.details["values"] and entry.subject_id == alice.pk
