"""The chat page's own signals: a lost connection, the tab's title, a clean console."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from serving.children import free_port
from sessions_app.models import User
from testkit.upstream import ScriptedUpstream
from tests.e2e.conftest import (
    ACTION_TIMEOUT_MS,
    LiveServer,
    daphne_environment,
    log_in,
    start_daphne,
    stop_daphne,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

ANSWER = "[data-testid=assistant-message]"
# The socket retries with a growing random pause, up to a few seconds between tries.
RECONNECT_TIMEOUT_MS = 40_000


def send(page: Page, text: str) -> None:
    expect(page.get_by_test_id("chat-send")).to_be_enabled()
    box = page.get_by_test_id("chat-input")
    box.fill(text)
    box.press("Enter")
    expect(page.locator(ANSWER).last).to_have_attribute("data-run-status", "completed")


def errors_of(page: Page) -> list[str]:
    """Console errors and failed responses the page meets from now on."""
    seen: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.append(f"{message.text} ({message.location.get('url', '')})")

    page.on("console", on_console)
    page.on("response", lambda r: r.status >= 400 and seen.append(f"{r.status} {r.url}"))
    return seen


@pytest.fixture
def own_server(
    upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path
) -> Iterator[LiveServer]:
    """A daphne of this test's own, which the test may stop and start again on its port."""
    server = start_daphne(daphne_environment(upstream_server), free_port(), tmp_path / "log")
    try:
        yield server
    finally:
        stop_daphne(server)


def test_a_lost_connection_is_shown_and_blocks_sending_until_it_is_back(
    browser: Browser, own_server: LiveServer, upstream_server: ScriptedUpstream, alice: User
):
    context = browser.new_context(base_url=own_server.url)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    try:
        page = context.new_page()
        log_in(page, "alice", "alice-pass-123")
        notice = page.get_by_test_id("connection-notice")
        send_button = page.get_by_test_id("chat-send")
        expect(send_button).to_be_enabled()
        expect(notice).to_be_hidden()

        stop_daphne(own_server)
        expect(notice).to_be_visible()
        expect(notice).to_have_text("Reconnecting…")
        expect(send_button).to_be_disabled()
        box = page.get_by_test_id("chat-input")
        box.fill("sent while down")
        box.press("Enter")
        expect(box).to_have_value("sent while down")  # kept, to send once back

        port = int(own_server.url.rsplit(":", 1)[1])
        env = daphne_environment(upstream_server)
        own_server.process = start_daphne(env, port, own_server.log).process  # stopped as before
        expect(notice).to_be_hidden(timeout=RECONNECT_TIMEOUT_MS)
        expect(send_button).to_be_enabled()
        box.press("Enter")
        expect(page.get_by_test_id("user-message")).to_have_text("sent while down")
        expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    finally:
        context.close()


def test_the_first_message_of_a_second_chat_leaves_no_console_error(page: Page, login, alice: User):
    login(page, "alice", "alice-pass-123")
    send(page, "first chat")
    page.get_by_test_id("new-session").click()
    expect(page.get_by_test_id("session-title")).to_have_text("New chat")
    errors = errors_of(page)
    htmx_errors: list[str] = []
    page.on("console", lambda m: "htmx" in m.text and htmx_errors.append(m.text))

    send(page, "second chat")
    expect(page.get_by_test_id("session-item")).to_have_count(2)
    expect(page.get_by_text("No chats yet.")).to_be_hidden()
    assert htmx_errors == []
    assert errors == []


def test_pages_ask_for_no_missing_favicon(page: Page, live_server_url: str, login, alice: User):
    errors = errors_of(page)
    page.goto("/accounts/login/")
    login(page, "alice", "alice-pass-123")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and httpx.get(live_server_url + icon).status_code == 200
    answer = httpx.get(live_server_url + "/favicon.ico", follow_redirects=True)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("image/")
    assert errors == []


def test_renaming_a_chat_renames_the_browser_tab(page: Page, login, alice: User):
    login(page, "alice", "alice-pass-123")
    send(page, "Plans for the weekend")
    expect(page).to_have_title("Plans for the weekend · Parley")

    page.get_by_test_id("session-rename").click()
    page.get_by_label("New name").fill("Trip to the coast")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("session-title")).to_have_text("Trip to the coast")
    expect(page).to_have_title("Trip to the coast · Parley")
    page.reload()
    expect(page).to_have_title("Trip to the coast · Parley")


def test_logging_out_in_another_tab_says_so_and_stops_reconnecting(
    browser: Browser, live_server_url: str, alice: User
):
    context = browser.new_context(base_url=live_server_url)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    try:
        chat = context.new_page()
        log_in(chat, "alice", "alice-pass-123")
        expect(chat.get_by_test_id("chat-send")).to_be_enabled()
        other = context.new_page()
        other.goto("/settings/")
        other.get_by_role("button", name="Log out").click()
        expect(chat.get_by_test_id("chat-notice")).to_have_text(
            "You signed out in this browser; sign in again."
        )
        expect(chat.get_by_test_id("chat-send")).to_be_disabled()
        # Not a lost connection: the page does not claim to be coming back.
        chat.wait_for_timeout(1_500)
        expect(chat.get_by_test_id("connection-notice")).to_be_hidden()
    finally:
        context.close()
