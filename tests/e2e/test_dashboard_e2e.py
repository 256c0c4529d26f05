"""The metrics dashboard in a real browser: every chart drawn with data, no script errors, and
a name made to run script does not."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import ConsoleMessage, Page, expect

from sessions_app.models import Agent, CallKind, LLMCall, Run, RunStatus, Session, User

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOAD = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture
def history(alice: User) -> None:
    """A week of runs, each with a chat call, some rated, one failed, under a hostile name."""
    agent = Agent.objects.create(name=PAYLOAD, model=f"model {PAYLOAD}")
    session = Session.objects.create(user=alice, agent=agent, session_name=PAYLOAD)
    now = timezone.now()
    for i in range(7):
        when = now - timedelta(days=i, hours=1)
        status = RunStatus.ERROR if i == 3 else RunStatus.COMPLETED
        run = Run.objects.create(
            session=session, user=alice, agent=agent, position=i + 1, status=status,
            input=PAYLOAD, model=agent.model, duration=1.0 + i, error=PAYLOAD,
            feedback_rating=1 if i % 2 else -1, feedback_at=when,
        )  # fmt: skip
        call = LLMCall.objects.create(
            run=run, session=session, user=alice, agent=agent, kind=CallKind.CHAT,
            model=agent.model, input_tokens=100 + i, output_tokens=20, total_tokens=120 + i,
            time_to_first_token=0.2 + i / 10, duration=1.0 + i, cost="0.0100",
        )  # fmt: skip
        Run.objects.filter(pk=run.pk).update(created_at=when)
        LLMCall.objects.filter(pk=call.pk).update(created_at=when)


def _ours(message: ConsoleMessage) -> bool:
    """An error of the page's own; the browser's request for /favicon.ico (which the admin's
    pages do not name) is not."""
    return message.type == "error" and not message.location["url"].endswith("/favicon.ico")


def test_staff_see_every_chart_drawn_with_data_and_no_script_runs_from_a_name(
    page: Page, login: Callable[[Page, str, str], None], staff: User, history: None
):
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if _ours(m) else None)

    login(page, "staff", "staff-pass-123")
    page.goto("/admin/")
    page.get_by_role("link", name="Dashboard").click()
    expect(page.get_by_role("heading", name="Metrics dashboard")).to_be_visible()

    expect(page.locator("canvas[data-chart]")).to_have_count(5)
    # The scripts are deferred: wait until each canvas has its chart.
    page.wait_for_function(
        """() => typeof Chart !== 'undefined'
            && [...document.querySelectorAll('canvas[data-chart]')]
                .every((canvas) => Chart.getChart(canvas))"""
    )
    drawn = page.evaluate(
        """() => [...document.querySelectorAll('canvas[data-chart]')].map((canvas) => {
            const chart = Chart.getChart(canvas);
            const values = chart ? chart.data.datasets.flatMap((set) => set.data) : [];
            return [canvas.dataset.chart, values.filter((v) => v !== null && v > 0).length];
        })"""
    )
    assert dict(drawn) == {
        "runs_by_status": 7, "tokens_by_model": 7, "first_token": 14, "cost_per_day": 7,
        "feedback_per_day": 7,
    }  # fmt: skip
    expect(page.locator("#table-top_agents")).to_contain_text(PAYLOAD)
    expect(page.locator('[data-tile="runs"] .dash-value')).to_have_text("7")
    assert dialogs == [] and errors == []
