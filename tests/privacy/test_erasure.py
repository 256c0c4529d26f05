"""Erasing a person: every row of every model that points at their account is walked, and none
still names or quotes them; what they used stays counted; the command asks first, and the
users admin erases after a confirmation page."""

from __future__ import annotations

import io
import json
import uuid
from decimal import Decimal

import pytest
from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session as StoredSignIn
from django.core.management import call_command
from django.db import models
from django.db.models import Sum
from django.test import Client

from audit_app.models import Action, AuditEntry
from audit_app.record import record
from budgets_app.models import Budget
from datasets_app.models import Dataset, DatasetItem
from datasets_app.services import collect
from evals_app.models import Experiment, HumanVerdict, Score, Trial
from sessions_app.accounts import create_token
from sessions_app.models import (
    CallKind,
    DeletedRun,
    ImportedIdentity,
    LLMCall,
    LoginFailure,
    Message,
    Role,
    Run,
    RunStatus,
    Session,
    User,
)
from shares_app import links

pytestmark = pytest.mark.django_db

SECRET = "ZELDA-SECRET-7731"
# What would name or quote her: her name, address, username, and her words.
MARKERS = ("zelda", "Zeldina", "Fitzgerald", "zelda@example.org", SECRET)
# Rows that may still point at the erased account: they hold counts and choices, no words of
# hers, and are why the account stays (as an anonymous husk): usage, what she did as staff, and
# the audit log.
MAY_POINT = {
    "sessions_app.LLMCall.user", "sessions_app.DeletedRun.user",
    "sessions_app.DeletedSession.user", "sessions_app.RunDay.user", "sessions_app.CallDay.user",
    "sessions_app.AgentVersion.created_by", "datasets_app.Dataset.created_by",
    "datasets_app.DatasetItem.added_by", "evals_app.Experiment.created_by",
    "evals_app.EvalRule.created_by", "evals_app.HumanVerdict.rater", "admin.LogEntry.user",
    "audit_app.AuditEntry.actor", "audit_app.AuditEntry.subject", "sessions_app.User.groups",
}  # fmt: skip


def keys_to_users() -> list[models.Field]:
    """Every field of every model that points at an account: foreign keys (checked or not),
    one-to-ones and many-to-manys."""
    user = apps.get_model("sessions_app", "User")
    return [
        field
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if field.is_relation and not field.auto_created and field.related_model is user
    ]


def text_fields(model: type[models.Model]) -> list[str]:
    kinds = (models.CharField, models.TextField, models.JSONField)
    return [f.name for f in model._meta.concrete_fields if isinstance(f, kinds)]


def quoting(markers: tuple[str, ...]) -> list[str]:
    """Every row of every table whose text or JSON holds one of the markers."""
    found = []
    for model in apps.get_models():
        names = text_fields(model)
        if not names:
            continue
        for row in model._default_manager.values("pk", *names).iterator():
            for name in names:
                value = row[name]
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                if any(marker.lower() in (text or "").lower() for marker in markers):
                    found.append(f"{model._meta.label}.{name} of {row['pk']}")
    return found


@pytest.fixture
def zelda(django_user_model, agent, staff):
    """A person with something in every table that can hold something of hers."""
    zelda = django_user_model.objects.create_user(
        "zelda",
        "zelda@example.org",
        "zelda-pass-123",
        first_name="Zeldina",
        last_name="Fitzgerald",
        is_staff=True,
    )
    team = Group.objects.create(name="team")
    zelda.groups.add(team)
    session = Session.objects.create(user=zelda, agent=agent, session_name=f"About {SECRET}")
    runs = []
    for n in range(3):
        run = Run.objects.create(
            session=session,
            user=zelda,
            agent=agent,
            position=n + 1,
            status=RunStatus.COMPLETED,
            input=f"{SECRET} {n}",
            content=f"Yes {SECRET}",
            feedback_rating=1,
            feedback_comment=f"{SECRET} great",
        )
        Message.objects.create(
            run=run, session=session, order=0, role=Role.USER, content=f"{SECRET} {n}"
        )
        Message.objects.create(
            run=run, session=session, order=1, role=Role.ASSISTANT, content=f"Yes {SECRET}"
        )
        LLMCall.objects.create(
            run=run,
            session=session,
            user=zelda,
            model="m",
            total_tokens=100,
            cost=Decimal("0.5"),
            sent_messages=[{"role": "user", "content": SECRET}],
        )
        runs.append(run)
    LLMCall.objects.create(
        session=session,
        user=zelda,
        kind=CallKind.TITLE,
        model="m",
        total_tokens=10,
        sent_messages=[{"content": SECRET}],
    )
    runs[2].delete()  # a deleted run: its record stays, counted
    token, _ = create_token(zelda, f"token of {SECRET}")
    links.create(session, show_owner=True, show_tools=False, days=None)
    budget = Budget.objects.create(
        user=zelda, measure="tokens", period="day", limit=1000, note=f"for {SECRET}"
    )
    Budget.objects.create(group=team, shared=True, measure="tokens", period="month", limit=10**6)
    ImportedIdentity.objects.create(source="agno", external_user_id="zelda", user=zelda)
    LoginFailure.objects.create(username="zelda", address="10.0.0.1")
    LoginFailure.objects.create(username="ZELDA", address="10.0.0.2")
    dataset = Dataset.objects.create(name="good answers", created_by=zelda)
    collect.add_run(dataset, runs[0])
    item = DatasetItem.objects.get()
    experiment = Experiment.objects.create(
        dataset=dataset, baseline=agent.live_version, created_by=staff
    )
    trial = Trial.objects.create(
        experiment=experiment,
        item=item,
        item_uuid=item.pk,
        version=agent.live_version,
        content=f"re {SECRET}",
        sent_messages=[{"content": SECRET}],
    )
    Score.objects.create(
        trial=trial, scorer="judge", reason=f"{SECRET} ok", judge_prompt=[{"content": SECRET}]
    )
    other = Trial.objects.create(
        experiment=experiment, item_uuid=uuid.uuid4(), version=agent.live_version
    )
    HumanVerdict.objects.create(
        baseline_trial=other,
        candidate_trial=other,
        rater=zelda,
        choice="tie",
        baseline_shown_first=True,
        comment=f"{SECRET} said",
    )
    # The admin's history names each as it was called: her name, her words.
    for obj in (session, runs[0], zelda, token, budget, item):
        LogEntry.objects.log_actions(staff.pk, [obj], CHANGE, change_message="[]")
    browser = Client()
    browser.force_login(zelda)  # a stored sign-in
    record(
        staff, Action.TRANSCRIPT_READ, f"Opened session {session.pk}", subject=zelda, obj=session
    )
    call_command("rollup_usage", days=2, stdout=None)
    return zelda


def test_no_row_still_names_or_quotes_an_erased_person(zelda):
    assert len(quoting(MARKERS)) > 15  # the fixture put her everywhere
    pk = zelda.pk
    call_command("erase_user", "zelda", "--noinput", stdout=io.StringIO())

    still = []
    for field in keys_to_users():
        model = field.model
        label = f"{model._meta.label}.{field.name}"
        if field.many_to_many:
            count = model._default_manager.filter(**{field.name: pk}).count()
            count = count if model is not User else User.objects.get(pk=pk).groups.count()
        else:
            count = model._default_manager.filter(**{field.attname: pk}).count()
        if count and label not in MAY_POINT:
            still.append(f"{label}: {count}")
    assert still == []
    assert quoting(MARKERS) == []
    husk = User.objects.get(pk=pk)
    assert husk.username.startswith("erased-") and not husk.is_active and not husk.is_staff
    assert not husk.has_usable_password() and husk.email == husk.first_name == ""
    signed_in = [s.get_decoded().get(SESSION_KEY) for s in StoredSignIn.objects.all()]
    assert str(pk) not in signed_in


def test_usage_stays_counted_without_the_person(zelda):
    before = LLMCall.objects.filter(user=zelda).aggregate(t=Sum("total_tokens"), c=Sum("cost"))
    started = Run.objects.filter(user=zelda).count() + DeletedRun.objects.filter(user=zelda).count()
    call_command("erase_user", "zelda", "--noinput", stdout=io.StringIO())
    after = LLMCall.objects.filter(user=zelda).aggregate(t=Sum("total_tokens"), c=Sum("cost"))
    assert before == after == {"t": 310, "c": Decimal("1.5")}
    assert DeletedRun.objects.filter(user=zelda).count() == started == 3
    # The group's shared budget still counts what she used.
    from django.utils import timezone

    from budgets_app import rules, spend

    shared = Budget.objects.get(shared=True)
    limit = rules.budget_limit(shared)
    assert spend.used([limit], timezone.now())[limit] == 310


def test_the_command_reports_what_went_and_asks_first(zelda, monkeypatch, capsys):
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    call_command("erase_user", "zelda")
    assert "Nothing was erased." in capsys.readouterr().out
    assert Session.objects.filter(user=zelda).exists()
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    call_command("erase_user", "zelda")
    out = capsys.readouterr().out
    for line in (
        "sessions: 1",
        "runs: 2",
        "messages: 4",
        "API tokens: 1",
        "share links: 1",
        "dataset items: 1",
        "budgets: 1",
        "rating comments: 1",
    ):
        assert f"  {line}\n" in out
    entry = AuditEntry.objects.get(action=Action.ERASURE)
    assert entry.subject_id == zelda.pk and entry.details["sessions"] == 1


def test_an_unknown_name_is_a_clear_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No user is called 'nobody'"):
        call_command("erase_user", "nobody", "--noinput")


def test_the_users_admin_erases_after_a_confirmation_page(root, superuser, zelda):
    form = {"action": "erase_people", "_selected_action": [str(zelda.pk), str(superuser.pk)]}
    page = root.post("/admin/sessions_app/user/", form)
    assert page.status_code == 200 and 'data-testid="erase-confirmation"' in page.content.decode()
    assert "1 selected account (yours, or a superuser" in page.content.decode()
    assert Session.objects.filter(user=zelda).exists()
    done = root.post("/admin/sessions_app/user/", {**form, "confirmed": "yes"})
    assert done.status_code == 302
    assert not Session.objects.filter(user=zelda).exists()
    assert User.objects.get(pk=superuser.pk).is_active  # the one erasing is never erased
    assert AuditEntry.objects.get(action=Action.ERASURE).actor_id == superuser.pk


def test_staff_without_the_delete_permission_are_not_offered_erasure(staff, zelda):
    from django.test import Client

    from tests.support.roles import grant

    grant(staff, "view_user")
    client = Client()
    client.force_login(staff)
    page = client.get("/admin/sessions_app/user/").content.decode()
    assert "erase_people" not in page
