"""Budgets as people see them: what is left on their settings page; for staff, budgets and
use in the admin and on the dashboard, and every change in the audit log."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from audit_app.models import Action, AuditEntry
from budgets_app.models import Budget
from evals_app.models import Experiment, Score, Trial
from sessions_app.models import CallKind, LLMCall

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rows(page: str) -> list[str]:
    found = re.findall(r'<tr data-testid="budget-row".*?</tr>', page, re.S)
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in found]


def test_the_settings_page_shows_what_is_left_of_each_budget(alice, settings):
    settings.PARLEY_DEFAULT_BUDGET = "10000 tokens/day, 20 usd/month"
    LLMCall.objects.create(user=alice, model="m", total_tokens=2500, cost="5.5")
    LLMCall.objects.create(user=alice, kind=CallKind.TITLE, model="m", total_tokens=500)
    page = signed_in(alice).get("/settings/").content.decode()
    shown = rows(page)
    assert len(shown) == 2
    assert shown[0].startswith("Your monthly budget of $20.00 $5.50 $14.50")
    assert shown[1].startswith("Your daily budget of 10,000 tokens 3,000 tokens 7,000 tokens")


def test_with_no_budget_the_settings_page_says_so(alice):
    page = signed_in(alice).get("/settings/").content.decode()
    assert "No budget limits what you use." in page


def test_a_used_up_budget_says_none_is_left(alice):
    Budget.objects.create(user=alice, measure="runs", period="week", limit=0)
    page = signed_in(alice).get("/settings/").content.decode()
    assert 'class="used-up"' in page and "<strong>none</strong>" in page


def test_experiments_count_to_the_staff_member_who_started_them(staff, agent):
    from datasets_app.models import Dataset

    Budget.objects.create(user=staff, measure="tokens", period="month", limit=1000)
    dataset = Dataset.objects.create(name="d")
    version = agent.live_version
    experiment = Experiment.objects.create(dataset=dataset, baseline=version, created_by=staff)
    trial = Trial.objects.create(
        experiment=experiment,
        item_uuid="00000000-0000-0000-0000-000000000001",
        version=version,
        total_tokens=300,
        finished_at=experiment.created_at,
    )
    Score.objects.create(trial=trial, scorer="judge", judge_tokens=200)
    page = signed_in(staff).get("/settings/").content.decode()
    assert rows(page)[0].startswith("Your monthly budget of 1,000 tokens 500 tokens 500 tokens")


def test_the_admin_lists_budgets_with_their_use(root, alice, bob, agent):
    team = Group.objects.create(name="team")
    team.user_set.add(alice, bob)
    Budget.objects.create(user=alice, measure="tokens", period="day", limit=1000)
    Budget.objects.create(group=team, measure="runs", period="day", limit=0)
    Budget.objects.create(shared=True, measure="tokens", period="month", limit=5000)
    LLMCall.objects.create(user=alice, model="m", total_tokens=400)
    LLMCall.objects.create(user=bob, model="m", total_tokens=100)
    page = root.get("/admin/budgets_app/budget/").content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "alice Tokens Day 1,000 tokens 400 tokens" in text
    assert "each of group team Runs Day 0 runs each: 2 of 2 used up" in text
    assert "everyone together Tokens Month 5,000 tokens 500 tokens" in text


def test_budget_changes_in_the_admin_are_audited(root, superuser, alice):
    form = {"user": alice.pk, "measure": "tokens", "period": "day", "limit": "500", "note": ""}
    assert root.post("/admin/budgets_app/budget/add/", form).status_code == 302
    budget = Budget.objects.get()
    changed = {**form, "limit": "800"}
    root.post(f"/admin/budgets_app/budget/{budget.pk}/change/", changed)
    root.post(f"/admin/budgets_app/budget/{budget.pk}/delete/", {"post": "yes"})
    entries = list(AuditEntry.objects.order_by("pk"))
    assert [e.action for e in entries] == [Action.BUDGET] * 3
    assert [e.actor_id for e in entries] == [superuser.pk] * 3
    assert entries[0].summary == f"Added budget #{budget.pk}"
    assert entries[1].summary == f"Changed budget #{budget.pk}: Limit"
    assert entries[1].details["values"]["limit"] == "800.000000"
    assert entries[2].summary == f"Deleted budget #{budget.pk}"


def test_the_dashboard_counts_people_at_a_limit_and_draws_each_budgets_use(
    root, alice, bob, settings
):
    settings.PARLEY_DEFAULT_BUDGET = "100 tokens/day"
    Budget.objects.create(user=bob, measure="tokens", period="day", limit=1000)
    LLMCall.objects.create(user=alice, model="m", total_tokens=150)
    LLMCall.objects.create(user=bob, model="m", total_tokens=250)
    page = root.get("/admin/dashboard/").content.decode()
    assert "People at a budget limit" in page
    assert "Budgets used now" in page
    from budgets_app.dashboard import budget_figures

    figures = budget_figures(None)
    # alice is over the default; bob's own budget replaces it for him, and he is not near it.
    assert figures.tiles[0].value == 1
    chart = figures.charts[0].chart
    bars = dict(zip(chart["labels"], chart["datasets"][0]["data"], strict=True))
    assert bars == {
        "1,000 tokens per day, bob": 25.0,
        "100 tokens per day, default (most used)": 150.0,
    }


def test_staff_without_the_view_permission_see_no_budgets(staff):
    page = signed_in(staff).get("/admin/dashboard/").content.decode()
    assert "People at a budget limit" not in page
    staff.user_permissions.add(Permission.objects.get(codename="view_budget"))
    page = signed_in(staff).get("/admin/dashboard/").content.decode()
    assert "People at a budget limit" in page


def test_an_unreadable_default_budget_stops_the_checks(settings):
    settings.PARLEY_DEFAULT_BUDGET = "100 tokens/day, lots of runs"
    with pytest.raises(SystemCheckError, match=r"parley.E5.*'lots of runs'"):
        call_command("check")
