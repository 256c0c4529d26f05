"""Datasets in a real browser: staff pick runs on the run list, add them to a dataset, accept
one on its page and download the dataset as openai-chat lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from datasets_app.models import Dataset, DatasetItem
from sessions_app.models import Agent, Session, User
from tests.support.apiclient import stored_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(django_user_model) -> User:
    return django_user_model.objects.create_superuser("root", password="root-pass-123")


# Where a link's words are drawn, within the page.
WORDS_BOX = """link => {
    const words = document.createRange();
    words.selectNodeContents(link);
    const box = words.getBoundingClientRect();
    return {y: box.y, height: box.height};
}"""


# The submit button's box and the Cancel link's, read in one go.
BOTH_BOXES = """(row, submit) => {
    const box = el => {
        const r = el.getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height};
    };
    const saved = [...row.querySelectorAll("input[type=submit], button")].find(
        el => (el.value || el.textContent).trim() === submit);
    const cancel = [...row.querySelectorAll("a")].find(el => el.textContent.trim() === "Cancel");
    return [box(saved), box(cancel)];
}"""


def beside_the_submit(row: Locator, submit: str) -> None:
    """The row's Cancel is a button as the admin's own secondary one: as tall as the submit
    button, level with it, just after it, padded alike with its words in its middle, and drawn
    as a button (a background of its own)."""
    saved = row.get_by_role("button", name=submit)
    cancel = row.get_by_role("link", name="Cancel")
    # Both measured in one frame, once the page has loaded: a shift of the page between two
    # measurements (the admin's scripts and fonts arriving) would move one and not the other.
    row.page.wait_for_load_state("load")
    row.evaluate("() => document.fonts.ready")
    box, back = row.evaluate(BOTH_BOXES, submit)
    assert abs(back["height"] - box["height"]) <= 1, (back, box)
    assert abs(back["y"] - box["y"]) <= 1, (back, box)
    assert 0 <= back["x"] - (box["x"] + box["width"]) <= 20, (back, box)
    words = cancel.evaluate(WORDS_BOX)
    middle = box["y"] + box["height"] / 2
    assert abs(words["y"] + words["height"] / 2 - middle) <= 2, (words, box)
    padding = "link => getComputedStyle(link).padding"
    assert cancel.evaluate(padding) == saved.evaluate(padding)
    background = cancel.evaluate("link => getComputedStyle(link).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background


def test_staff_collect_runs_accept_one_and_download_it(
    page: Page, login: Callable[[Page, str, str], None], root: User, alice: User
):
    agent = Agent.objects.create(name="Baker", model="scripted")
    session = Session.objects.create(user=alice, agent=agent, session_name="Baking")
    stored_run(session, "How do I bake bread?", "Knead it **well**.")
    stored_run(session, "And rye bread?", "Use a sourdough starter.")
    stored_run(session, "Unrelated question", "Not this one.")
    good = Dataset.objects.create(name="good-answers")
    Dataset.objects.create(name="another")

    login(page, "root", "root-pass-123")
    page.goto("/admin/sessions_app/run/")
    for question in ("How do I bake bread?", "And rye bread?"):
        page.locator("#result_list tr", has_text=question).locator("input.action-select").check()
    page.locator("select[name=action]").select_option("add_runs_to_dataset")
    page.locator("button[name=index]").click()

    expect(page.get_by_text("Add the 2 selected runs to a dataset")).to_be_visible()
    beside_the_submit(page.locator(".submit-row"), "Add to dataset")
    page.get_by_label("Dataset").select_option(label="good-answers")
    page.get_by_role("button", name="Add to dataset").click()
    expect(page.locator(".messagelist .success")).to_have_text(
        "2 runs added to the dataset “good-answers”."
    )

    page.goto("/admin/datasets_app/dataset/")
    page.get_by_role("link", name="good-answers").click()
    counts = page.get_by_test_id("item-counts")
    counts.locator("tr[data-status=pending] td").last.get_by_role("link").click()
    page.get_by_role("link", name="How do I bake bread?").click()
    expect(page.get_by_test_id("original-answer").locator("strong")).to_have_text("well")
    page.get_by_test_id("item-accept").click()
    expect(page.locator(".messagelist .success")).to_have_text("The item was saved and accepted.")

    page.goto(f"/admin/datasets_app/dataset/{good.pk}/change/")
    expect(
        page.get_by_test_id("item-counts").locator("tr[data-status=accepted] td").last
    ).to_have_text("1")
    export = page.get_by_test_id("export-form")
    export.get_by_label("Format").select_option("openai-chat")
    with page.expect_download() as downloading:
        export.get_by_role("button", name="Download", exact=True).click()
    download = downloading.value
    lines = Path(download.path()).read_text().splitlines()
    assert download.suggested_filename.startswith("good-answers")
    exported = [json.loads(line) for line in lines]
    assert len(exported) == 1
    said = [(m["role"], m["content"]) for m in exported[0]["messages"]]
    assert said[-2:] == [("user", "How do I bake bread?"), ("assistant", "Knead it **well**.")]
    assert DatasetItem.objects.filter(dataset=good, status="accepted").count() == 1
