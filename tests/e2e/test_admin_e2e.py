"""The admin in a real browser: staff find a session in the list and read its transcript; a
message or name made to run script does not."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from sessions_app.models import Agent, Session, User
from tests.support.apiclient import stored_run

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOAD = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture
def root(django_user_model) -> User:
    return django_user_model.objects.create_superuser("root", password="root-pass-123")


def test_staff_open_a_transcript_from_the_session_list(
    page: Page, login: Callable[[Page, str, str], None], root: User, alice: User
):
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    agent = Agent.objects.create(name=f"Agent {PAYLOAD}", model="scripted")
    for i in range(60):
        Session.objects.create(user=alice, agent=agent, session_name=f"Filler {i}")
    session = Session.objects.create(user=alice, agent=agent, session_name=f"Recipes {PAYLOAD}")
    stored_run(session, f"How do I bake bread? {PAYLOAD}", "Use **flour**.\n\n" + "Knead. " * 400)
    stored_run(session, "And cake?", f"```python\nprint('cake')\n```\n{PAYLOAD}")

    login(page, "root", "root-pass-123")
    page.goto("/admin/sessions_app/session/")
    page.locator("#searchbar").fill("Recipes")
    page.keyboard.press("Enter")
    page.get_by_role("link", name=f"Recipes {PAYLOAD}").click()

    transcript = page.get_by_test_id("transcript")
    expect(transcript.get_by_test_id("transcript-run")).to_have_count(2)
    expect(transcript.locator("strong", has_text="flour")).to_be_visible()
    expect(transcript.locator("pre code", has_text="print('cake')")).to_be_visible()
    expect(transcript.get_by_text(f"How do I bake bread? {PAYLOAD}")).to_be_visible()
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []
    expect(page.get_by_label("Session name")).to_have_value(f"Recipes {PAYLOAD}")
