"""Experiments in a real browser: a person rates answers blind (A and B in an order random across
pairs and the same on reload, nothing naming a version), and an experiment's page follows its
progress while it runs, then shows its report with a chart per scorer, within the CSP."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from evals_app.models import Choice, Experiment, ExperimentStatus, HumanVerdict, TrialStatus
from sessions_app.models import User
from tests.e2e.conftest import ACTION_TIMEOUT_MS
from tests.evals import factories
from tests.support.roles import grant

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "Quillfeather"
PAIRS = 20
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
    window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


def fruit(role: str, i: int, repeat: int) -> str:
    """Answers that tell the versions apart to the test, and to no one else."""
    return f"{'Kiwi' if role == 'baseline' else 'Mango'} {i}"


@pytest.fixture
def rater(django_user_model) -> User:
    user = django_user_model.objects.create_user("rater", password="rater-pass-123", is_staff=True)
    return grant(
        user, "view_experiment", "change_experiment", "rate_experiment", "view_dataset",
        "view_datasetitem",
    )  # fmt: skip


def a_is_baseline(page: Page) -> bool:
    first = page.get_by_test_id("answer-A").inner_text()
    second = page.get_by_test_id("answer-B").inner_text()
    assert ("Kiwi" in first) != ("Kiwi" in second) and ("Mango" in first) != ("Mango" in second)
    return "Kiwi" in first


def test_a_person_rates_pairs_blind_in_an_order_random_across_pairs_and_stable_on_reload(
    page: Page, login: Callable[[Page, str, str], None], rater: User
):
    _, baseline, draft = factories.two_versions(AGENT)
    dataset = factories.dataset_with_items("twenty", PAIRS)
    made = factories.experiment(
        dataset, baseline, draft, answer=fruit, name=f"{AGENT} v2 against v1", seed=3
    )
    login(page, "rater", "rater-pass-123")
    page.goto(f"/admin/evals_app/experiment/{made.pk}/change/")
    page.get_by_test_id("rate-link").click()

    seen: list[tuple[str, bool]] = []
    for _ in range(PAIRS):
        expect(page.get_by_test_id("answer-A")).to_be_visible()
        question = page.get_by_test_id("rate-input").inner_text()
        order = a_is_baseline(page)
        page.reload()
        assert page.get_by_test_id("rate-input").inner_text() == question
        assert a_is_baseline(page) == order
        text = page.locator("body").inner_text()
        for hidden in (AGENT, "v1", "v2", "draft", "baseline", "candidate"):
            assert hidden not in text, hidden
        seen.append((question, order))
        with page.expect_navigation():
            page.get_by_test_id("choose-A").click()

    expect(page.get_by_test_id("rate-done")).to_be_visible()
    assert len({question for question, _ in seen}) == PAIRS
    assert {order for _, order in seen} == {True, False}
    verdicts = list(HumanVerdict.objects.filter(rater=rater))
    assert len(verdicts) == PAIRS
    for verdict in verdicts:
        expected = Choice.BASELINE if verdict.baseline_shown_first else Choice.CANDIDATE
        assert verdict.choice == expected
    assert sum(v.baseline_shown_first for v in verdicts) == sum(order for _, order in seen)


def test_the_page_follows_a_running_experiment_then_shows_its_report_and_charts(
    browser, live_server_url: str, login: Callable[[Page, str, str], None], rater: User
):
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(
        factories.dataset_with_items("three", 3), baseline, draft, status=ExperimentStatus.RUNNING
    )
    made.trials.filter(version=draft).update(status=TrialStatus.PENDING)
    context = browser.new_context(base_url=live_server_url)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    try:
        login(page, "rater", "rater-pass-123")
        page.goto(f"/admin/evals_app/experiment/{made.pk}/change/")
        expect(page.get_by_test_id("progress-count")).to_have_text("3 of 6")
        expect(page.get_by_test_id("cancel-experiment")).to_be_visible()

        made.trials.update(status=TrialStatus.COMPLETED)
        expect(page.get_by_test_id("progress-count")).to_have_text("6 of 6")
        Experiment.objects.filter(pk=made.pk).update(status=ExperimentStatus.COMPLETED)

        # Once it has ended, the page loads again: the report, no polling, no cancel button.
        expect(page.get_by_test_id("experiment-progress")).to_have_attribute(
            "data-status", "completed"
        )
        expect(page.get_by_test_id("experiment-progress")).not_to_have_attribute(
            "hx-trigger", "every 2s"
        )
        expect(page.get_by_test_id("cancel-experiment")).to_have_count(0)
        page.wait_for_function(
            "() => typeof Chart !== 'undefined'"
            " && Chart.getChart(document.querySelector('canvas[data-chart=exact]'))"
        )
        means = page.evaluate(
            "() => Chart.getChart(document.querySelector('canvas[data-chart=exact]'))"
            ".data.datasets[1].data"
        )
        assert means[0] == 1.0 and 0 < means[1] < 1
        assert page.evaluate("window.__violations") == []
    finally:
        context.close()


def test_the_page_says_when_its_progress_cannot_be_fetched_until_it_can_again(
    page: Page, login: Callable[[Page, str, str], None], rater: User
):
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(
        factories.dataset_with_items("three", 3), baseline, draft, status=ExperimentStatus.RUNNING
    )
    login(page, "rater", "rater-pass-123")
    page.goto(f"/admin/evals_app/experiment/{made.pk}/change/")
    lost = page.get_by_test_id("progress-lost")
    expect(page.get_by_test_id("progress-count")).to_have_text("6 of 6")
    expect(lost).to_be_hidden()

    # The server unreachable: the polls fail to be sent at all.
    page.route("**/progress/", lambda route: route.abort("connectionrefused"))
    expect(lost).to_be_visible()
    expect(lost).to_have_text("Lost contact with the server; retrying…")
    page.unroute("**/progress/")
    expect(lost).to_be_hidden()

    # Reached, but answering with an error (a proxy without its server behind it).
    page.route("**/progress/", lambda route: route.fulfill(status=502, body="Bad gateway"))
    expect(lost).to_be_visible()
    page.unroute("**/progress/")
    expect(lost).to_be_hidden()
    expect(page.get_by_test_id("progress-count")).to_have_text("6 of 6")


def test_the_rescore_form_shows_each_help_text_under_its_field(
    page: Page, login: Callable[[Page, str, str], None], rater: User
):
    grant(rater, "view_agent")  # the judge is chosen too, as on the start form
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(factories.dataset_with_items("three", 3), baseline, draft)
    page.set_viewport_size({"width": 1280, "height": 900})
    login(page, "rater", "rater-pass-123")
    page.goto(f"/admin/evals_app/experiment/{made.pk}/change/")
    rescore = page.get_by_test_id("rescore")
    rescore.locator("summary").click()
    rescore.scroll_into_view_if_needed()

    helped = rescore.locator(".form-row:has(.help)")
    assert helped.count() == 4  # the pattern's, the rubric's, the scale's, the judge's
    lefts = set()
    for i in range(helped.count()):
        row = helped.nth(i)
        field = row.locator("input, textarea, select").first.bounding_box()
        said = row.locator(".help").bounding_box()
        assert field is not None and said is not None
        assert said["y"] >= field["y"] + field["height"] - 1, row.inner_text()  # below, not beside
        assert said["x"] <= field["x"] + 1, row.inner_text()  # from the field's left edge
        lefts.add(round(field["x"]))
    assert len(lefts) == 1  # the fields start in one column
