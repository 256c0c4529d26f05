"""With the Content-Security-Policy enforced, every page still works: the chat sends and streams,
the admin's actions run, the dashboard draws its charts, the API docs render; and the browser
reports no violation of the policy on any of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from sessions_app.models import Run, RunStatus, User
from testkit.upstream import Reply, ScriptedUpstream
from tests.e2e.conftest import ACTION_TIMEOUT_MS, log_in
from tests.e2e.test_chat_e2e import send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
    const where = `${e.sourceFile}:${e.lineNumber}`;
    window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${where}`);
});
"""


@pytest.fixture
def context(browser: Browser, live_server_url: str) -> Iterator[BrowserContext]:
    context = browser.new_context(base_url=live_server_url)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.add_init_script(RECORD_VIOLATIONS)
    try:
        yield context
    finally:
        context.close()


class Policed:
    """A page whose policy violations and console messages about the policy are kept."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.console: list[str] = []
        page.on(
            "console",
            lambda m: self.console.append(m.text) if "Content Security Policy" in m.text else None,
        )

    def assert_no_violation(self, where: str) -> None:
        assert self.page.evaluate("window.__violations") == [], where
        assert self.console == [], where


@pytest.fixture
def root(django_user_model) -> User:
    return django_user_model.objects.create_superuser("root", password="root-pass-123")


def test_the_chat_sends_streams_and_rates_under_the_policy(
    context: BrowserContext, alice: User, upstream: ScriptedUpstream
):
    upstream.script(Reply(tokens=30, delay=0.02))
    policed = Policed(context.new_page())
    page = policed.page
    log_in(page, "alice", "alice-pass-123")

    send(page, "Count for me")
    answer = page.get_by_test_id("assistant-message")
    expect(answer).to_contain_text("tok3")  # streamed over the socket
    expect(answer).to_have_attribute("data-run-status", "completed", timeout=15_000)
    expect(answer).to_contain_text("tok29")
    page.get_by_test_id("feedback-up").click()  # an htmx POST with its CSRF header
    expect(page.get_by_test_id("feedback-up")).to_have_attribute("aria-pressed", "true")
    assert Run.objects.get().feedback_rating == 1
    policed.assert_no_violation("the chat")

    page.reload()
    expect(page.get_by_test_id("assistant-message")).to_contain_text("tok29")
    policed.assert_no_violation("the chat, reloaded")


def test_the_admin_the_dashboard_and_the_api_docs_work_under_the_policy(
    context: BrowserContext, alice: User, root: User, upstream: ScriptedUpstream
):
    policed = Policed(context.new_page())
    page = policed.page
    log_in(page, "alice", "alice-pass-123")
    upstream.script(Reply("An answer to rate."))
    send(page, "Something to rate")
    expect(page.get_by_test_id("assistant-message")).to_have_attribute(
        "data-run-status", "completed", timeout=15_000
    )
    context.clear_cookies()

    page.goto("/admin/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("root-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Parley administration")).to_be_visible()
    policed.assert_no_violation("the admin's index")

    # An action: the admin's own scripts tick the row and count the selection.
    page.goto("/admin/sessions_app/run/")
    page.locator("input.action-select").first.check()
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    page.locator("select[name=action]").select_option(
        label="Rate the selected runs 👍 good (staff)"
    )
    page.locator("button[name=index]").click()  # the admin's "Go"
    expect(page.locator(".messagelist")).to_be_visible()
    assert Run.objects.get().staff_rating == 1
    policed.assert_no_violation("an admin action")

    run = Run.objects.get(status=RunStatus.COMPLETED)
    page.goto(f"/admin/sessions_app/session/{run.session_id}/change/")
    expect(page.locator("#content")).to_contain_text("An answer to rate.")
    policed.assert_no_violation("a transcript")

    page.goto("/admin/dashboard/")
    page.wait_for_function(
        """() => typeof Chart !== 'undefined'
            && [...document.querySelectorAll('canvas[data-chart]')]
                .every((canvas) => Chart.getChart(canvas))"""
    )
    assert page.locator("canvas[data-chart]").count() == 5
    policed.assert_no_violation("the dashboard")

    page.goto("/api/docs")
    expect(page.locator(".opblock").first).to_be_visible()
    policed.assert_no_violation("the API docs")
