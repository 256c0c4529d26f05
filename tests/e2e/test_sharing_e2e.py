"""In Chromium: sharing a chat (the link another person reads, a snapshot until updated, gone
once revoked), and a used-up budget said in words on the chat page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from budgets_app.models import Budget
from sessions_app.models import Agent, RunStatus, Session, User
from shares_app import links
from shares_app.models import ShareLink
from testkit.upstream import Reply, ScriptedUpstream
from tests.e2e.test_chat_e2e import ANSWER, send
from tests.e2e.test_limits_across_processes import logged_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]


def answered(page: Page, count: int) -> None:
    expect(page.locator(f"{ANSWER}[data-run-status=completed]")).to_have_count(count)


def test_a_shared_chat_is_a_snapshot_that_its_owner_updates_and_revokes(
    page: Page, browser: Browser, live_server_url: str, login, alice: User, bob: User,
    upstream: ScriptedUpstream,
):  # fmt: skip
    upstream.script(Reply("Go to **Lisbon** <img src=x onerror=alert(1)>"), Reply("Madeira."))
    login(page, "alice", "alice-pass-123")
    send(page, "Where to go?")
    answered(page, 1)
    expect(page).to_have_url(re.compile(r"/s/[^/]+/$"))
    chat = page.url

    page.get_by_test_id("session-share").click()
    page.get_by_test_id("share-create").click()
    url = page.get_by_test_id("share-url").input_value()
    assert re.fullmatch(rf"{live_server_url}/share/[A-Za-z0-9_-]{{43}}/", url)

    reader = browser.new_context(base_url=live_server_url).new_page()
    login(reader, "bob", "bob-pass-123")
    reader.goto(url)
    expect(reader.get_by_test_id("shared-title")).to_have_text("Where to go?")
    expect(reader.locator(".rendered strong")).to_have_text("Lisbon")
    expect(reader.locator(".rendered img")).to_have_count(0)
    expect(reader.get_by_test_id("shared-owner")).to_have_count(0)
    assert "alice" not in reader.locator("main").inner_text()
    assert reader.locator('meta[name="robots"]').get_attribute("content").startswith("noindex")

    page.goto(chat)
    send(page, "And in winter?")
    answered(page, 2)
    reader.reload()
    expect(reader.locator(ANSWER)).to_have_count(1)  # the rest stays private

    page.get_by_test_id("session-share").click()
    page.get_by_test_id("share-update").click()
    reader.reload()
    expect(reader.locator(ANSWER)).to_have_count(2)
    expect(reader.locator(ANSWER).last).to_contain_text("Madeira.")

    page.goto("/settings/")
    expect(page.get_by_test_id("share-link-row")).to_have_count(1)
    page.get_by_test_id("share-link-revoke").click()
    reader.reload()
    expect(reader.get_by_test_id("shared-gone")).to_be_visible()
    reader.context.close()


def test_a_used_up_budget_is_said_in_words_on_the_chat_page(
    page: Page, login, alice: User, upstream: ScriptedUpstream
):
    Budget.objects.create(user=alice, measure="runs", period="day", limit=1)
    upstream.script(Reply("One."))
    login(page, "alice", "alice-pass-123")
    send(page, "first")
    answered(page, 1)
    send(page, "second")
    notice = page.get_by_test_id("chat-notice")
    expect(notice).to_contain_text("You have used your daily budget of 1 run (1 run used).")
    expect(notice).to_contain_text(re.compile(r"It renews \w+ \d+ \w+ at 00:00 \(UTC\)\."))
    expect(page.locator(ANSWER)).to_have_count(1)

    page.goto("/settings/")
    row = page.get_by_test_id("budget-row")
    expect(row).to_contain_text("Your daily budget of 1 run")
    expect(row.get_by_test_id("budget-left")).to_have_text("none")


def test_a_link_revoked_by_another_process_opens_nothing_at_once(
    live_server_url: str, alice: User, bob: User, agent: Agent
):
    """Made and revoked here, read through the server process: no process keeps a link."""
    session = Session.objects.create(user=alice, agent=agent, session_name="Plans")
    session.runs.create(
        user=alice, agent=agent, position=1, input="Hello?", content="Hi.",
        status=RunStatus.COMPLETED,
    )  # fmt: skip
    token = links.create(session, show_owner=False, show_tools=False, days=None)
    reader = logged_in(live_server_url, "bob", "bob-pass-123")
    assert reader.get(f"/share/{token}/").status_code == 200
    links.revoke(ShareLink.objects.get())
    gone = reader.get(f"/share/{token}/")
    assert gone.status_code == 404 and "This link opens nothing" in gone.text
