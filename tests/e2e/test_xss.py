"""Script-bearing text in every place a person or a model can put it (a message, an answer, a
session's name, an agent's name) stays text: in the chat, the admin's pages and the dashboard.

The browser ignores the Content-Security-Policy here (`bypass_csp`), so what is checked is the
escaping and sanitizing alone: each payload sets `window.__xss` or opens a dialog if it runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from datasets_app.models import Dataset
from datasets_app.services import catalog
from sessions_app.models import Agent, LLMCall, Message, Run, Session, User
from testkit.upstream import Reply, ScriptedUpstream
from tests.e2e.conftest import ACTION_TIMEOUT_MS, log_in
from tests.e2e.test_chat_e2e import send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

PAYLOADS = [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=1">',
    "<img src=x onerror=alert(1)>",
    '<svg onload="window.__xss=1"></svg>',
    "<svg><script>window.__xss=1</script></svg>",
    '"><script>alert(2)</script>',
    "'><img src=x onerror=alert(3)>",
    '<a href="javascript:window.__xss=1">click me</a>',
    '<details open ontoggle="window.__xss=1">',
    '<iframe srcdoc="<script>parent.__xss=1</script>"></iframe>',
    '<math><mtext><table><mglyph><style><img src=x onerror="window.__xss=1">',
    "[click here](javascript:window.__xss=1)",
    "[data link](data:text/html,<script>alert(4)</script>)",
    '![picture](x" onerror="window.__xss=1)',
    "[entity](javascript&#58;window.__xss=1)",
    "&lt;script&gt;window.__xss=1&lt;/script&gt;",
    "&#60;img src=x onerror=alert(5)&#62;",
    "{{ 7*7 }} {% debug %} ${alert(6)} #{7*7} <%= 7*7 %>",
]
MESSAGE = "\n".join(PAYLOADS)
# Each on its own paragraph, so Markdown reads every one of them.
ANSWER = "\n\n".join(PAYLOADS) + "\n\n```html\n<script>window.__xss=1</script>\n```"
NAME = '<img src=x onerror="window.__xss=1">{{ name }}'[:100]
INERT = """() => {
    const hostile = [...document.querySelectorAll('*')].filter((el) =>
        [...el.attributes].some((a) => a.name.startsWith('on'))
        || /^\\s*(javascript|data):/i.test(el.getAttribute('href') || '')
        || ['IFRAME', 'EMBED', 'OBJECT'].includes(el.tagName)
        || (el.tagName === 'SCRIPT' && el.type !== 'application/json' && !el.src)
        || (el.tagName === 'IMG' && !(el.getAttribute('src') || '').startsWith('/static/')));
    return {xss: window.__xss === undefined ? null : window.__xss,
            hostile: hostile.map((el) => el.outerHTML.slice(0, 120))};
}"""


@pytest.fixture
def context(browser: Browser, live_server_url: str) -> Iterator[BrowserContext]:
    context = browser.new_context(base_url=live_server_url, bypass_csp=True)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    try:
        yield context
    finally:
        context.close()


class Watched:
    """A page whose dialogs are counted (and dismissed)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))

    def assert_inert(self, where: str) -> None:
        self.page.wait_for_load_state("load")
        found = self.page.evaluate(INERT)
        assert found == {"xss": None, "hostile": []}, where
        assert self.dialogs == [], where


def chat_with_payloads(watched: Watched, upstream: ScriptedUpstream) -> Session:
    page = watched.page
    upstream.script(Reply(ANSWER, delay=0.01))
    page.goto("/")
    send(page, MESSAGE)
    answer = page.get_by_test_id("assistant-message")
    expect(answer).to_have_attribute("data-run-status", "completed", timeout=15_000)
    return Session.objects.get(user__username="alice")


def test_payloads_in_messages_answers_and_names_stay_text_in_the_chat(
    context: BrowserContext, alice: User, upstream: ScriptedUpstream
):
    Agent.objects.filter(is_default=True).update(name=NAME)
    watched = Watched(context.new_page())
    page = watched.page
    log_in(page, "alice", "alice-pass-123")
    expect(page.locator("option").first).to_have_text(NAME)  # the agent picker
    watched.assert_inert("the new chat page")

    session = chat_with_payloads(watched, upstream)
    watched.assert_inert("the chat, streamed")
    Session.objects.filter(pk=session.pk).update(session_name=NAME)

    page.reload()
    user_message = page.get_by_test_id("user-message")
    answer = page.get_by_test_id("assistant-message")
    for payload in PAYLOADS:
        expect(user_message).to_contain_text(payload)
    for text in ["<script>window.__xss=1</script>", "click here", "{% debug %} ${alert(6)}"]:
        expect(answer).to_contain_text(text)
    expect(page.get_by_test_id("session-title")).to_have_text(NAME)
    watched.assert_inert("the chat, reloaded")

    page.get_by_placeholder("Search chats").fill("{{ name }}")
    expect(page.get_by_test_id("session-item")).to_have_count(1)
    watched.assert_inert("the chat, searched")


@pytest.fixture
def root(django_user_model) -> User:
    return django_user_model.objects.create_superuser("root", password="root-pass-123")


def test_payloads_stay_text_in_the_admin_and_the_dashboard(
    context: BrowserContext, alice: User, root: User, upstream: ScriptedUpstream
):
    watched = Watched(context.new_page())
    page = watched.page
    log_in(page, "alice", "alice-pass-123")
    session = chat_with_payloads(watched, upstream)
    context.clear_cookies()

    Agent.objects.filter(is_default=True).update(name=NAME)
    Session.objects.filter(pk=session.pk).update(session_name=NAME)
    run = Run.objects.get(session=session)
    Run.objects.filter(pk=run.pk).update(error=MESSAGE)  # shown among the latest errors
    dataset = Dataset.objects.create(name="xss", description=MESSAGE, created_by=root)
    (item,) = catalog.add_items(root, dataset.pk, run_id=run.pk)
    agent = Agent.objects.get(is_default=True)
    message = Message.objects.filter(run=run).first()
    call = LLMCall.objects.filter(run=run).first()
    assert message is not None and call is not None

    log_in(page, "root", "root-pass-123")
    pages = {
        "/admin/sessions_app/session/": NAME,
        "/admin/sessions_app/session/?q=%7B%7B+name": NAME,
        f"/admin/sessions_app/session/{session.pk}/change/": PAYLOADS[0],
        "/admin/sessions_app/run/": PAYLOADS[1],
        f"/admin/sessions_app/run/{run.pk}/change/": PAYLOADS[0],
        "/admin/sessions_app/message/": PAYLOADS[1],
        f"/admin/sessions_app/message/{message.pk}/change/": PAYLOADS[0],
        f"/admin/sessions_app/llmcall/{call.pk}/change/": PAYLOADS[0],
        "/admin/sessions_app/agent/": NAME,
        f"/admin/sessions_app/agent/{agent.pk}/change/": "",
        "/admin/datasets_app/dataset/": "xss",
        f"/admin/datasets_app/dataset/{dataset.pk}/change/": "",
        "/admin/datasets_app/datasetitem/": PAYLOADS[0],
        f"/admin/datasets_app/datasetitem/{item.pk}/change/": PAYLOADS[0],
        "/admin/dashboard/": NAME,
    }
    for path, shown in pages.items():
        page.goto(path)
        if shown:
            expect(page.locator("#content")).to_contain_text(shown)
        watched.assert_inert(path)
