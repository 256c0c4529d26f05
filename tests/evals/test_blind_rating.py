"""People judge an experiment's answers blind: one pair at a time, as "A" and "B" in an order
drawn for each person and pair (random across pairs, the same on reload), with nothing on the
page that names a version; their choice is stored against the versions, and the experiment's
page shows the tally and how far raters agree."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client

from evals_app import blind
from evals_app.agreement import fleiss_kappa, percent_agreement
from evals_app.models import Choice, Experiment, HumanVerdict
from tests.evals import factories
from tests.support.roles import grant

LIST = "/admin/evals_app/experiment/"
ITEMS = ("view_dataset", "view_datasetitem")  # to read the items' words
AGENT = "Quillfeather"


def rate_url(experiment: Experiment) -> str:
    return f"{LIST}{experiment.pk}/rate/"


# -- agreement, against hand computations ---------------------------------------------------------

# Fleiss (1971) as Wikipedia works it: 10 subjects, 14 raters each, 5 categories; each row counts
# the raters who chose each category. P̄ = 0.378, P_e = 0.2128, κ = 0.210.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]  # fmt: skip


def as_choices(row: list[int]) -> list[int]:
    return [category for category, count in enumerate(row) for _ in range(count)]


def test_fleiss_kappa_matches_the_worked_example():
    subjects = [as_choices(row) for row in FLEISS_TABLE]
    assert percent_agreement(subjects) == pytest.approx(0.378, abs=5e-4)
    assert fleiss_kappa(subjects) == pytest.approx(0.2099, abs=5e-4)


def test_fleiss_kappa_with_a_different_number_of_raters_per_subject():
    # By hand: P_i = 1, 0 and (2·1 + 1·0)/(3·2) = 1/3, so P̄ = 4/9; of the 7 choices 4 are
    # candidate, 1 baseline, 2 tie, so P_e = (16 + 1 + 4)/49 = 3/7; κ = (4/9 - 3/7)/(4/7) = 1/36.
    # The subject with one rater says nothing about agreement and is left out.
    subjects = [["candidate"] * 2, ["candidate", "baseline"], ["tie", "tie", "candidate"], ["tie"]]
    assert percent_agreement(subjects) == pytest.approx(4 / 9)
    assert fleiss_kappa(subjects) == pytest.approx(1 / 36)


def test_agreement_is_undefined_without_two_raters_or_without_any_variety():
    assert percent_agreement([["tie"], ["baseline"]]) is None
    assert fleiss_kappa([["tie"], ["baseline"]]) is None
    everyone_alike = [["candidate"] * 3, ["candidate"] * 2]
    assert percent_agreement(everyone_alike) == 1.0
    assert fleiss_kappa(everyone_alike) is None  # chance agreement is 1: nothing to beat


def test_total_disagreement_is_below_chance():
    assert fleiss_kappa([["baseline", "candidate"], ["candidate", "baseline"]]) == -1.0


# -- the blind page ------------------------------------------------------------------------------


class Text(HTMLParser):
    """A page's text as a reader sees it: no tags, attributes, scripts or styles."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.hidden += tag in ("script", "style", "title")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("script", "style", "title")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def fruit(role: str, i: int, repeat: int) -> str:
    """Answers that tell the versions apart to the test, and to no one else."""
    return f"{'Kiwi' if role == 'baseline' else 'Mango'} {i}"


@pytest.fixture
def rated(db) -> Experiment:
    """Twenty items, each answered by both versions of an agent, in an experiment whose name
    says which versions it compares."""
    _, baseline, draft = factories.two_versions(AGENT)
    dataset = factories.dataset_with_items("twenty", 20)
    return factories.experiment(
        dataset, baseline, draft, answer=fruit, name=f"{AGENT} v2 against v1", seed=7
    )


def rater(django_user_model, name: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(name, password="x", is_staff=True)
    grant(user, *codenames)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def ann(django_user_model) -> Client:
    return rater(django_user_model, "ann", "view_experiment", "rate_experiment", *ITEMS)


@pytest.fixture
def ben(django_user_model) -> Client:
    return rater(django_user_model, "ben", "view_experiment", "rate_experiment", *ITEMS)


def shown_pair(client: Client, experiment: Experiment) -> tuple[str, bool, str]:
    """The pair offered (the form's id), whether A is the baseline's answer, and the text."""
    html = client.get(rate_url(experiment)).content.decode()
    pair = re.search(r'name="pair" value="([0-9a-f-]+)"', html).group(1)  # type: ignore[union-attr]
    a_part = html.split('data-testid="answer-A"')[1].split('data-testid="answer-B"')[0]
    return pair, "Kiwi" in a_part, visible_text(html)


def test_the_order_is_drawn_per_pair_and_stays_on_reload(ann, rated):
    seen: dict[str, bool] = {}
    for _ in range(20):
        pair, a_is_baseline, _ = shown_pair(ann, rated)
        assert shown_pair(ann, rated)[:2] == (pair, a_is_baseline)  # reloaded
        seen[pair] = a_is_baseline
        ann.post(rate_url(rated), {"pair": pair, "choice": "A"})

    assert len(seen) == 20
    assert set(seen.values()) == {True, False}
    verdicts = {str(v.candidate_trial_id): v for v in HumanVerdict.objects.all()}
    for pair, a_is_baseline in seen.items():
        verdict = verdicts[pair]
        assert verdict.baseline_shown_first is a_is_baseline
        assert verdict.choice == (Choice.BASELINE if a_is_baseline else Choice.CANDIDATE)
    assert "Nothing left for you to rate" in ann.get(rate_url(rated)).content.decode()


def test_the_page_names_no_version_agent_experiment_or_score(ann, rated):
    _, _, text = shown_pair(ann, rated)

    assert "Answer A" in text and "Answer B" in text
    for hidden in (AGENT, "v1", "v2", "draft", "baseline", "candidate", "exact"):
        assert hidden not in text, hidden


def test_choosing_b_and_tie_are_stored_against_the_versions_with_the_comment(ann, rated):
    pair, a_is_baseline, _ = shown_pair(ann, rated)
    ann.post(rate_url(rated), {"pair": pair, "choice": "B", "comment": "  B is kinder.  "})
    second, _, _ = shown_pair(ann, rated)
    ann.post(rate_url(rated), {"pair": second, "choice": "tie"})

    first = HumanVerdict.objects.get(candidate_trial_id=pair)
    assert first.choice == (Choice.CANDIDATE if a_is_baseline else Choice.BASELINE)
    assert first.comment == "B is kinder." and first.rater.username == "ann"
    assert HumanVerdict.objects.get(candidate_trial_id=second).choice == Choice.TIE


def test_every_rater_is_offered_every_pair_once_and_a_form_sent_twice_counts_once(ann, ben, rated):
    pair, _, _ = shown_pair(ann, rated)
    ann.post(rate_url(rated), {"pair": pair, "choice": "A"})
    ann.post(rate_url(rated), {"pair": pair, "choice": "B"})

    assert shown_pair(ann, rated)[0] != pair
    assert shown_pair(ben, rated)[0] == pair  # several raters per item
    assert HumanVerdict.objects.filter(candidate_trial_id=pair).count() == 1


def test_raters_see_the_pairs_in_orders_of_their_own(rated, django_user_model):
    pairs = blind.rateable(rated)
    ann, ben = (django_user_model.objects.create_user(n) for n in ("ann", "ben"))
    orders = {
        user.username: [blind.get_pair(rated, user, p.pk).baseline_first for p in pairs]
        for user in (ann, ben)
    }
    assert orders["ann"] != orders["ben"]
    assert orders["ann"] == [blind.get_pair(rated, ann, p.pk).baseline_first for p in pairs]


def test_rating_takes_the_right_to_rate_experiments(django_user_model, rated):
    # Changing experiments (cancel, rescore) is another right than judging their answers.
    viewer = rater(django_user_model, "viewer", "view_experiment", "change_experiment", *ITEMS)
    pair = blind.rateable(rated).first()

    assert viewer.get(rate_url(rated)).status_code == 403
    assert viewer.post(rate_url(rated), {"pair": pair.pk, "choice": "A"}).status_code == 403
    assert "rate-link" not in viewer.get(f"{LIST}{rated.pk}/change/").content.decode()
    assert not HumanVerdict.objects.exists()


def test_a_pair_from_elsewhere_is_not_found(ann, rated, db):
    _, baseline, draft = factories.two_versions("Other")
    other = factories.experiment(factories.dataset_with_items("other", 1), baseline, draft)
    foreign = blind.rateable(other).get()

    assert ann.post(rate_url(rated), {"pair": foreign.pk, "choice": "A"}).status_code == 404
    assert not HumanVerdict.objects.exists()


def test_the_experiment_page_tallies_verdicts_and_the_raters_agreement(ann, django_user_model, db):
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(factories.dataset_with_items("three", 3), baseline, draft)
    pairs = list(blind.rateable(made))
    first, second = (django_user_model.objects.create_user(n) for n in ("r1", "r2"))
    choices = {first: ["candidate"] * 3, second: ["candidate", "candidate", "baseline"]}
    for person, picked in choices.items():
        for pair, choice in zip(pairs, picked, strict=True):
            HumanVerdict.objects.create(
                baseline_trial_id=pair.baseline_trial_id, candidate_trial=pair, rater=person,
                choice=choice, baseline_shown_first=True,
            )  # fmt: skip

    html = ann.get(f"{LIST}{made.pk}/change/").content.decode()
    row = visible_text("<tr" + html.split('data-testid="people-row"')[1].split("</tr>")[0])

    # Agreement: the pairs' shares 1, 1 and 0 → 2/3. κ: P_e = (5² + 1²)/6² = 13/18, so
    # κ = (2/3 - 13/18)/(1 - 13/18) = -0.2.
    assert row.split() == ["Assistant", "v2", "(draft)", "5", "0", "1", "2", "3", "67", "%",
                           "-0.20"]  # fmt: skip
