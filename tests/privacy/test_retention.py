"""The retention period as cron runs it: `purge_expired` deletes sessions idle past their
period (the setting's, or their agent's), never those kept, in batches; the dataset items made
of them stay, and so do their usage counts."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit_app.models import Action, AuditEntry
from datasets_app.models import Dataset, DatasetItem
from datasets_app.services import collect
from sessions_app.models import Agent, DeletedRun, LLMCall, Message, Role, Run, RunStatus, Session

pytestmark = pytest.mark.django_db


def chat(user, agent, idle_days: float, runs: int = 1, **fields) -> Session:
    session = Session.objects.create(user=user, agent=agent, **fields)
    for n in range(runs):
        run = Run.objects.create(
            session=session,
            user=user,
            agent=agent,
            position=n + 1,
            status=RunStatus.COMPLETED,
            input="q",
            content="a",
        )
        Message.objects.create(run=run, session=session, order=0, role=Role.USER, content="q")
        Message.objects.create(run=run, session=session, order=1, role=Role.ASSISTANT, content="a")
        LLMCall.objects.create(run=run, session=session, user=user, model="m", total_tokens=7)
    when = timezone.now() - timedelta(days=idle_days)
    Session.objects.filter(pk=session.pk).update(updated_at=when)
    return session


def purge(*args: str) -> str:
    out = io.StringIO()
    call_command("purge_expired", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_nothing_expires_without_a_period(alice, agent):
    chat(alice, agent, idle_days=3650)
    assert purge() == "Deleted 0 sessions (0 runs, 0 messages) in 0 batches.\n"
    assert Session.objects.count() == 1


def test_idle_sessions_past_the_period_go_but_not_kept_ones(alice, agent, settings):
    settings.PARLEY_RETENTION_DAYS = 30
    old = chat(alice, agent, idle_days=31, runs=2)
    kept = chat(alice, agent, idle_days=400, kept=True)
    recent = chat(alice, agent, idle_days=29)
    assert purge("--dry-run") == (
        "Would delete 1 sessions (2 runs, 4 messages) past their retention period.\n"
    )
    assert Session.objects.count() == 3
    assert purge() == "Deleted 1 sessions (2 runs, 4 messages) in 1 batches.\n"
    assert set(Session.objects.values_list("pk", flat=True)) == {kept.pk, recent.pk}
    assert not Session.objects.filter(pk=old.pk).exists()
    # Usage stays counted: its calls (without their text) and its runs' records.
    assert LLMCall.objects.filter(user=alice).count() == 4
    assert DeletedRun.objects.filter(session_id=old.pk).count() == 2
    entry = AuditEntry.objects.get(action=Action.PURGE)
    assert entry.actor is None and entry.details["sessions"] == 1


def test_an_agent_may_set_its_own_period_or_keep_forever(alice, agent, settings):
    settings.PARLEY_RETENTION_DAYS = 30
    short = Agent.objects.create(name="Short", model="m", retention_days=1)
    forever = Agent.objects.create(name="Forever", model="m", retention_days=0)
    gone = chat(alice, short, idle_days=2)
    stays = chat(alice, forever, idle_days=365)
    default = chat(alice, agent, idle_days=2)
    purge()
    assert not Session.objects.filter(pk=gone.pk).exists()
    assert Session.objects.filter(pk__in=[stays.pk, default.pk]).count() == 2


def test_dataset_items_are_snapshots_and_stay(alice, agent, settings):
    settings.PARLEY_RETENTION_DAYS = 1
    session = chat(alice, agent, idle_days=5)
    dataset = Dataset.objects.create(name="kept answers")
    collect.add_run(dataset, session.runs.get())
    purge()
    assert not Session.objects.exists()
    item = DatasetItem.objects.get()
    assert item.run_id is None and item.messages  # its text is its own copy


def test_a_large_purge_goes_in_batches(alice, agent, settings):
    settings.PARLEY_RETENTION_DAYS = 1
    for _ in range(12):
        chat(alice, agent, idle_days=3, runs=2)  # 4 messages each
    said = purge("--batch", "10", "--pause", "0")
    assert said == "Deleted 12 sessions (24 runs, 48 messages) in 6 batches.\n"
    assert not Message.objects.exists()


def test_staff_keep_sessions_from_the_admin_and_it_is_audited(root, superuser, alice, agent):
    session = chat(alice, agent, idle_days=0)
    form = {"action": "keep_sessions", "_selected_action": [session.pk]}
    assert root.post("/admin/sessions_app/session/", form).status_code == 302
    session.refresh_from_db()
    assert session.kept
    entry = AuditEntry.objects.get(action=Action.KEPT)
    assert (entry.actor_id, entry.subject_id, entry.object_id) == (
        superuser.pk,
        alice.pk,
        session.pk,
    )
    form["action"] = "stop_keeping_sessions"
    root.post("/admin/sessions_app/session/", form)
    session.refresh_from_db()
    assert not session.kept


def test_a_session_with_an_answer_under_way_is_left_for_the_next_purge(alice, agent, settings):
    settings.PARLEY_RETENTION_DAYS = 1
    busy = chat(alice, agent, idle_days=3)
    Run.objects.filter(session=busy).update(status=RunStatus.RUNNING)
    idle = chat(alice, agent, idle_days=3)
    assert purge() == "Deleted 1 sessions (1 runs, 2 messages) in 1 batches.\n"
    assert set(Session.objects.values_list("pk", flat=True)) == {busy.pk}
    assert not Session.objects.filter(pk=idle.pk).exists()
