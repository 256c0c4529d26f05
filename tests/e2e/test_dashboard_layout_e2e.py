"""The dashboard's tables at a laptop's width: long names (a session's title, a model's full
name) wrap inside their column, and no table is wider than its card."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from sessions_app.models import Agent, CallKind, LLMCall, Run, RunStatus, Session, User

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "accounts/fireworks/models/llama-v3p1-405b-instruct-long-context-preview"
TITLE = "Planning the quarterly offsite in Lisbon with the whole product and design team"
AGENT = "Customer support assistant for the enterprise billing portal"


@pytest.fixture
def long_names(alice: User) -> None:
    agent = Agent.objects.create(name=AGENT, model=MODEL)
    session = Session.objects.create(user=alice, agent=agent, session_name=TITLE)
    now = timezone.now()
    for i in range(5):
        run = Run.objects.create(
            session=session, user=alice, agent=agent, position=i + 1, input="Hello",
            status=RunStatus.COMPLETED, model=MODEL, duration=10.0 + i, time_to_first_token=1.5,
        )  # fmt: skip
        LLMCall.objects.create(
            run=run, session=session, user=alice, agent=agent, kind=CallKind.CHAT, model=MODEL,
            input_tokens=100, output_tokens=20, total_tokens=120, duration=10.0 + i,
            time_to_first_token=1.5, cost="0.0100",
        )  # fmt: skip
        Run.objects.filter(pk=run.pk).update(created_at=now - timedelta(hours=i + 1))


def test_every_table_fits_its_card_at_1280_pixels_wide(
    page: Page, login: Callable[[Page, str, str], None], staff: User, long_names: None
):
    page.set_viewport_size({"width": 1280, "height": 900})
    login(page, "staff", "staff-pass-123")
    page.goto("/admin/dashboard/")
    expect(page.locator("#table-slowest_runs tbody tr")).to_have_count(5)

    overflow = page.evaluate(
        """() => [...document.querySelectorAll('.dash-table')].map((card) => {
            const table = card.querySelector('table');
            if (!table) return [card.id, 0];
            const over = table.getBoundingClientRect().right - card.getBoundingClientRect().right;
            return [card.id, Math.max(0, Math.round(over), table.scrollWidth - card.clientWidth)];
        })"""
    )
    assert dict(overflow) == dict.fromkeys(dict(overflow), 0)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280

    # A long name wraps, whole, inside its column; figures keep to one line.
    cells = page.locator("#table-slowest_runs tbody tr").first.locator("td")
    expect(cells.nth(4)).to_have_text(TITLE)
    assert lines_of(cells.nth(4)) > 1 and lines_of(cells.nth(5)) == 1  # session, duration


LINES = """(cell) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""


def lines_of(cell: Locator) -> int:
    return cell.evaluate(LINES)
