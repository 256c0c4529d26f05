"""Chatting in a real browser: streaming, reloads, stop, isolation, safety, regenerate, thumbs."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Locator, Page, expect

from sessions_app.models import Agent, Run, RunStatus, Session, User
from testkit.upstream import Reply, ScriptedUpstream

# Every page here chats with the default agent.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

ANSWER = "[data-testid=assistant-message]"


def send(page: Page, text: str) -> None:
    # Send is enabled once the chat socket is open; until then Enter keeps the text and sends
    # nothing, as a user would see. A fresh page may take a moment on a loaded machine.
    expect(page.get_by_test_id("chat-send")).to_be_enabled()
    box = page.get_by_test_id("chat-input")
    box.fill(text)
    box.press("Enter")


def test_sign_up_and_chat_with_a_streamed_answer(page: Page, upstream: ScriptedUpstream):
    upstream.script(Reply(tokens=40, delay=0.05))
    page.goto("/accounts/signup/")
    page.get_by_label("Username").fill("dora")
    page.get_by_label("Password", exact=True).fill("correct-horse-battery")
    page.get_by_label("Password confirmation").fill("correct-horse-battery")
    page.get_by_role("button", name="Sign up").click()

    send(page, "Count for me")
    expect(page.get_by_test_id("user-message")).to_have_text("Count for me")
    answer = page.locator(ANSWER)
    expect(answer).to_have_attribute("data-run-status", "running")
    expect(page.get_by_test_id("chat-stop")).to_be_visible()
    expect(page.get_by_test_id("chat-send")).to_be_disabled()
    # Pieces arrive while it is still running.
    expect(answer).to_contain_text("tok3")
    assert answer.get_attribute("data-run-status") == "running"

    expect(answer).to_have_attribute("data-run-status", "completed", timeout=15_000)
    expect(answer).to_contain_text("tok39")
    expect(page.get_by_test_id("chat-send")).to_be_enabled()
    expect(page.get_by_test_id("chat-input")).to_have_value("")
    session = Session.objects.get(user__username="dora")
    expect(page).to_have_url(re.compile(rf"/s/{session.session_id}/$"))
    expect(page.get_by_test_id("session-item")).to_have_count(1)
    expect(page.get_by_test_id("session-title")).to_have_text("Count for me")

    page.reload()
    expect(page.get_by_test_id("user-message")).to_have_text("Count for me")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    expect(page.locator(ANSWER)).to_contain_text("tok0 tok1 tok2")


def test_shift_enter_is_a_new_line_and_enter_sends(page: Page, login, alice: User, upstream):
    login(page, "alice", "alice-pass-123")
    box = page.get_by_test_id("chat-input")
    box.type("first line")
    box.press("Shift+Enter")
    box.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    expect(page.get_by_test_id("chat-send")).to_be_enabled()
    box.press("Enter")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    assert Run.objects.get(user=alice).input == "first line\nsecond line"


def test_alice_and_bob_never_see_each_others_sessions(
    browser: Browser, live_server_url: str, login, alice: User, bob: User, upstream
):
    pages = {}
    for user in ("alice", "bob"):
        context = browser.new_context(base_url=live_server_url)
        pages[user] = context.new_page()
        login(pages[user], user, f"{user}-pass-123")
    send(pages["alice"], "alice's secret plan")
    expect(pages["alice"].locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    send(pages["bob"], "bob's question")
    expect(pages["bob"].locator(ANSWER)).to_have_attribute("data-run-status", "completed")

    pages["bob"].reload()
    expect(pages["bob"].get_by_test_id("session-item")).to_have_count(1)
    expect(pages["bob"].get_by_test_id("session-list")).not_to_contain_text("secret plan")
    alice_session = Session.objects.get(user=alice)
    response = pages["bob"].goto(f"/s/{alice_session.session_id}/")
    assert response.status == 404
    for page in pages.values():
        page.context.close()


def test_stop_mid_answer_keeps_the_partial_answer(page: Page, login, alice: User, upstream):
    upstream.script(Reply(tokens=300, delay=0.05))
    login(page, "alice", "alice-pass-123")
    send(page, "Talk for a long time")
    answer = page.locator(ANSWER)
    expect(answer).to_contain_text("tok5")
    page.get_by_test_id("chat-stop").click()
    expect(answer).to_have_attribute("data-run-status", "cancelled")
    expect(answer).to_contain_text("Stopped.")
    run = Run.objects.get(user=alice)
    assert run.status == RunStatus.CANCELLED
    assert run.content.startswith("tok0 ") and "tok299" not in run.content
    expect(page.get_by_test_id("chat-send")).to_be_enabled()


def test_reload_mid_answer_shows_it_and_watches_it_finish(page: Page, login, alice: User, upstream):
    upstream.script(Reply(tokens=60, delay=0.05))
    login(page, "alice", "alice-pass-123")
    send(page, "Take your time")
    expect(page.locator(ANSWER)).to_contain_text("tok5")
    page.reload()
    answer = page.locator(ANSWER)
    expect(answer).to_have_attribute("data-run-status", "completed", timeout=15_000)
    expected = " ".join(f"tok{i}" for i in range(60))
    expect(answer.locator(".bubble")).to_have_text(expected)
    assert Run.objects.get(user=alice).content.strip() == expected


def test_an_answer_with_html_renders_as_inert_text(page: Page, login, alice: User, upstream):
    hostile = 'Look: <img src=x onerror=alert(1)> and <script>alert("xss")</script> done'
    upstream.script(Reply(hostile, delay=0.01))
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    login(page, "alice", "alice-pass-123")
    send(page, "Say something dangerous")
    answer = page.locator(ANSWER)
    expect(answer).to_contain_text("<img src=x onerror=alert(1)>")  # shown while streaming
    expect(answer).to_have_attribute("data-run-status", "completed")
    expect(answer).to_contain_text('<script>alert("xss")</script>')  # and once rendered
    assert answer.locator("img, script").count() == 0
    page.reload()
    expect(page.locator(ANSWER)).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator(f"{ANSWER} img, {ANSWER} script").count() == 0
    assert dialogs == []


def test_regenerate_keeps_both_answers(page: Page, login, alice: User, upstream):
    upstream.script(Reply("The first answer."), Reply("A second, better answer."))
    login(page, "alice", "alice-pass-123")
    send(page, "Answer me")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    page.get_by_test_id("regenerate").click()
    expect(page.locator(ANSWER)).to_have_count(2)
    expect(page.locator(ANSWER).nth(1)).to_have_attribute("data-run-status", "completed")
    expect(page.locator(ANSWER).nth(0)).to_contain_text("The first answer.")
    expect(page.locator(ANSWER).nth(1)).to_contain_text("A second, better answer.")
    page.reload()
    expect(page.locator(ANSWER)).to_have_count(2)


def test_thumbs_are_stored(page: Page, login, alice: User, upstream):
    login(page, "alice", "alice-pass-123")
    send(page, "Rate this")
    answer = page.locator(ANSWER)
    expect(answer).to_have_attribute("data-run-status", "completed")
    answer.get_by_test_id("feedback-up").click()
    expect(answer.get_by_test_id("feedback-up")).to_have_attribute("aria-pressed", "true")
    assert Run.objects.get(user=alice).feedback_rating == 1
    answer.get_by_test_id("feedback-down").click()
    expect(answer.get_by_test_id("feedback-down")).to_have_attribute("aria-pressed", "true")
    assert Run.objects.get(user=alice).feedback_rating == -1
    page.reload()
    expect(page.get_by_test_id("feedback-down")).to_have_attribute("aria-pressed", "true")


def test_a_failed_answer_shows_the_error_and_retry_works(page: Page, login, alice: User, upstream):
    upstream.script(Reply(status=500, error_message="upstream exploded"), Reply("Recovered."))
    login(page, "alice", "alice-pass-123")
    send(page, "Try this")
    answer = page.locator(ANSWER)
    expect(answer).to_have_attribute("data-run-status", "error")
    expect(page.get_by_test_id("run-error")).to_contain_text("upstream exploded")
    page.get_by_test_id("run-retry").click()
    expect(page.locator(ANSWER).nth(1)).to_have_attribute("data-run-status", "completed")
    expect(page.locator(ANSWER).nth(1)).to_contain_text("Recovered.")


def test_switching_sessions_follows_the_url_and_new_chat_starts_fresh(
    page: Page, login: Callable, alice: User, upstream
):
    login(page, "alice", "alice-pass-123")
    send(page, "first chat")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    first_url = page.url
    page.get_by_test_id("new-session").click()
    expect(page.get_by_test_id("session-title")).to_have_text("New chat")
    send(page, "second chat")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    expect(page.get_by_test_id("session-item")).to_have_count(2)
    page.get_by_test_id("session-item").filter(has_text="first chat").locator("a").click()
    expect(page).to_have_url(first_url)
    expect(page.get_by_test_id("user-message")).to_have_text("first chat")
    send(page, "more in the first chat")
    expect(page.locator(ANSWER).nth(1)).to_have_attribute("data-run-status", "completed")
    first = Session.objects.get(user=alice, session_name="first chat")
    assert list(first.runs.values_list("input", flat=True)) == [
        "first chat",
        "more in the first chat",
    ]


def test_a_message_sent_as_soon_as_another_session_shows_goes_over_the_socket(
    page: Page, login: Callable, alice: User, upstream
):
    login(page, "alice", "alice-pass-123")
    send(page, "first chat")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    page.get_by_test_id("new-session").click()
    send(page, "second chat")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    # htmx wires a swapped-in pane's form to the socket when it settles (20 ms after the swap by
    # default): a long settle makes the window between showing the pane and wiring it wide.
    page.evaluate("htmx.config.defaultSettleDelay = 1000")
    page.get_by_test_id("session-item").filter(has_text="first chat").locator("a").click()
    expect(page.get_by_test_id("user-message")).to_have_text("first chat")
    send(page, "sent at once")
    expect(page.locator(ANSWER).nth(1)).to_have_attribute("data-run-status", "completed")
    assert "input=" not in page.url  # not submitted as a page load
    first = Session.objects.get(user=alice, session_name="first chat")
    assert list(first.runs.values_list("input", flat=True)) == ["first chat", "sent at once"]


def test_the_settings_panel_edits_session_state(page: Page, login, alice: User, upstream):
    login(page, "alice", "alice-pass-123")
    send(page, "remember things")
    expect(page.locator(ANSWER)).to_have_attribute("data-run-status", "completed")
    page.get_by_test_id("session-settings-toggle").click()
    state = page.get_by_test_id("session-state")
    expect(state).to_have_value("{}")
    state.fill('{"favourite": "tea"')
    page.get_by_role("button", name="Save state").click()
    expect(page.get_by_test_id("session-state-error")).to_contain_text("not valid JSON")
    page.get_by_test_id("session-state").fill('{"favourite": "tea"}')
    page.get_by_role("button", name="Save state").click()
    expect(page.get_by_test_id("session-state-saved")).to_be_visible()
    assert Session.objects.get(user=alice).session_state == {"favourite": "tea"}


IN_ITS_LIST_BOX = """item => {
    const box = item.parentElement.getBoundingClientRect(), row = item.getBoundingClientRect();
    return row.top >= box.top && row.bottom <= box.bottom;
}"""


def make_chats(alice: User, count: int) -> None:
    """`count` chats, "chat 00" the oldest, a minute apart."""
    start = timezone.now() - timedelta(days=1)
    for n in range(count):
        session = Session.objects.create(user=alice, agent=Agent.objects.get(is_default=True))
        Session.objects.filter(pk=session.pk).update(
            session_name=f"chat {n:02d}", updated_at=start + timedelta(minutes=n)
        )


def wheel_sidebar_until_shown(page: Page, item: Locator) -> None:
    """Wheel over the sidebar until `item` is in its scroll box."""
    sidebar = page.get_by_test_id("session-list").bounding_box()
    assert sidebar is not None
    page.mouse.move(sidebar["x"] + sidebar["width"] / 2, sidebar["y"] + sidebar["height"] / 2)
    deadline = time.monotonic() + 20
    while not (item.count() and item.evaluate(IN_ITS_LIST_BOX)):
        assert time.monotonic() < deadline, "wheeling the sidebar never showed it"
        page.mouse.wheel(0, 400)
        page.wait_for_timeout(100)


def test_wheeling_the_sidebar_to_its_end_reaches_the_oldest_chat(page: Page, login, alice: User):
    """The sidebar is its own scroll box: the window never scrolls, the list does."""
    make_chats(alice, 46)
    login(page, "alice", "alice-pass-123")
    items = page.get_by_test_id("session-item")
    expect(items).to_have_count(30)  # one page; the oldest are further down
    expect(items.first).to_have_text("chat 45")

    wheel_sidebar_until_shown(page, items.filter(has_text="chat 00"))
    expect(items).to_have_count(46)
    expect(page.get_by_text("Loading…")).to_have_count(0)


def test_chats_active_elsewhere_while_scrolling_go_to_the_top_once(page: Page, login, alice: User):
    """A chat from a page not loaded yet, and one already shown, get new messages in another
    tab: scrolling on brings both to the top, and lists neither twice."""
    make_chats(alice, 46)
    login(page, "alice", "alice-pass-123")
    items = page.get_by_test_id("session-item")
    expect(items).to_have_count(30)

    for name in ("chat 40", "chat 05"):  # shown, then not loaded yet; chat 05 the latest
        Session.objects.filter(session_name=name).update(updated_at=timezone.now())
    wheel_sidebar_until_shown(page, items.filter(has_text="chat 00"))

    expect(items).to_have_count(46)
    expect(items.nth(0)).to_have_text("chat 05")
    expect(items.nth(1)).to_have_text("chat 40")
    expect(items.filter(has_text="chat 40")).to_have_count(1)
