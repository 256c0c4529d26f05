"""The admin in a real browser: staff find a session in the list and read its transcript; a
message or name made to run script does not."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from datasets_app.models import Dataset
from datasets_app.services.collect import add_run
from evals_app.models import EvalRule, Score
from evals_app.scorers import spec_key
from sessions_app.accounts import create_token
from sessions_app.models import Agent, RunStatus, Session, User
from tests.e2e.test_datasets_e2e import beside_the_submit
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


# Long, real-looking values: the widest a list may be asked to show.
LONG_USERNAME = "maximilian.vandenberghe-oyelaran_support-team.eu-west@example-corporation.com"
LONG_MODEL = "accounts/fireworks/models/meta-llama-3.1-405b-instruct-turbo-128k-preview-2024-07-23"
LONG_NAME = (
    "Quarterly planning: reconciling the EMEA logistics forecast with the revised procurement "
    "budget, vendor shortlists and the warehouse-automation-rollout-timeline-v2-final-FINAL.xlsx"
)
CHANGELISTS = [
    "/admin/sessions_app/session/",
    "/admin/sessions_app/run/",
    "/admin/sessions_app/message/",
    "/admin/sessions_app/llmcall/",
    "/admin/sessions_app/agent/",
    "/admin/sessions_app/user/",
    "/admin/sessions_app/apitoken/",
    "/admin/datasets_app/dataset/",
    "/admin/datasets_app/datasetitem/",
]


# A run's live scores as many as an agent's rules are likely to give it.
LIVE_SCORERS = [
    {"name": "judge", "rubric": "Is the plan complete and costed?", "scale": [1, 10]},
    {"name": "contains", "text": "quarterly"},
    {"name": "json_valid"},
]


def seed_long_values(django_user_model) -> None:
    """Sessions, runs (with live scores), calls, agents, a user, a token, a dataset and its items,
    each as long as people make them."""
    owner = django_user_model.objects.create_user(
        LONG_USERNAME[:150], email=f"{LONG_USERNAME}.invalid", password="x"
    )
    agent = Agent.objects.create(
        name="Procurement and logistics planning assistant (EMEA, quarterly review edition)",
        model=LONG_MODEL,
    )
    dataset = Dataset.objects.create(
        name="emea-logistics-procurement-planning-conversations-reviewed-by-support-2024-q3"
    )
    create_token(owner, "nightly-export-of-every-planning-conversation-to-the-data-warehouse")
    EvalRule.objects.create(agent=agent, scorers=LIVE_SCORERS)
    for n in range(3):
        session = Session.objects.create(user=owner, agent=agent, session_name=f"{LONG_NAME} {n}")
        run = stored_run(session, LONG_NAME * 3, "An answer " * 200, model=LONG_MODEL)
        stored_run(session, "Again?", "", status=RunStatus.ERROR)
        add_run(dataset, run)
        for spec, value in zip(LIVE_SCORERS, (10.0, 0.0, None), strict=True):
            Score.objects.create(run=run, scorer=spec_key(spec), value=value)


# What scrolls sideways on a list page: the page itself, or the box the admin puts the table in.
SCROLLED_SIDEWAYS = """() => [document.documentElement, ...document.querySelectorAll('.results')]
    .filter(box => box.scrollWidth > box.clientWidth)
    .map(box => `${box.className || box.tagName}: ${box.scrollWidth} > ${box.clientWidth}`)"""


def test_every_list_fits_a_1280_pixel_screen(
    page: Page, login: Callable[[Page, str, str], None], root: User, django_user_model
):
    seed_long_values(django_user_model)
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, "root", "root-pass-123")
    too_wide = {}
    for path in CHANGELISTS:
        page.goto(path)
        expect(page.locator("#result_list tbody tr").first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280, path
        if scrolled := page.evaluate(SCROLLED_SIDEWAYS):
            too_wide[path] = scrolled
    assert too_wide == {}


def test_the_new_draft_pages_cancel_sits_beside_its_submit_as_the_admins_buttons_do(
    page: Page, login: Callable[[Page, str, str], None], root: User
):
    agent = Agent.objects.create(name="Baker", model="scripted")
    page.set_viewport_size({"width": 1280, "height": 900})
    login(page, "root", "root-pass-123")
    page.goto(f"/admin/sessions_app/agent/{agent.pk}/versions/new/")

    beside_the_submit(page.get_by_test_id("draft-form").locator(".submit-row"), "Save draft")
