"""Evaluation on the staff dashboard: live scores, a tile and a daily chart by agent version
per scorer, and what evaluating cost, apart from the chat's figures; for staff who may see
them, narrowed by the page's filters."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.models import Agent
from tests.evals.scored_runs import RANGE, REGEX, experiment_usage, scored_runs
from tests.support.roles import grant

pytestmark = pytest.mark.django_db

URL = "/admin/dashboard/"


@pytest.fixture
def scored(alice):
    found = scored_runs(alice)
    experiment_usage(found["helper"], found["v1"], found["v2"])
    return found


def page(client: Client, query: str = RANGE):
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 200
    return {tile["key"]: tile for tile in response.context["tiles"]}, response


def test_the_score_tile_is_the_mean_live_score_beside_the_previous_period(root, scored):
    tiles, _ = page(root)
    tile = tiles[f"score:{REGEX}"]

    assert (tile["label"], tile["value"], tile["previous"]) == (
        "Live score: Matches “Hello”",  # the scorer in words, as its rule gives it
        "0.67",
        "0.50",
    )
    assert tile["change"] == "▲ 33.3 %" and tile["better"] is True
    assert ("of", "3 scores") in tile["parts"]
    # The page says which scorer, with the options its rule gives it.
    assert f'({REGEX} {{"pattern": "Hello"}})' in tile["hint"]
    # A failed score is no score: the JSON check failed on its one run.
    assert "score:json_valid" not in tiles


def test_the_daily_chart_draws_a_line_per_agent_version(root, scored):
    _, response = page(root)
    chart = response.context["charts"][f"live_score:{REGEX}"]

    assert chart["labels"] == ["2025-03-10", "2025-03-11"]
    assert chart["type"] == "line"
    assert [(d["label"], d["data"]) for d in chart["datasets"]] == [
        ("Helper v1", [1.0, None]),
        ("Helper v2", [0.0, 1.0]),
    ]
    html = response.content.decode()
    assert f'data-chart="live_score:{REGEX}"' in html
    assert "Live score per day by agent version: Regular expression" in html


def test_evaluation_usage_is_counted_apart_from_the_chat(root, scored):
    tiles, _ = page(root)

    tokens, cost = tiles["evaluation_tokens"], tiles["evaluation_cost"]
    assert (tokens["value"], tokens["previous"]) == ("150", "40")
    assert tokens["parts"] == [("experiments", "100"), ("judges", "50")]
    assert (cost["value"], cost["previous"]) == ("$0.0130", "–")
    # The chat's tokens stay the people's: the calls of the four runs in the range, 10 + 5 each.
    assert tiles["input_tokens"]["value"] == "40" and tiles["output_tokens"]["value"] == "20"


def test_the_agent_filter_narrows_scores_and_evaluation_usage(root, scored):
    other = Agent.objects.create(name="Other", model="scripted")
    tiles, _ = page(root, f"{RANGE}&agent={scored['helper'].pk}")
    assert tiles[f"score:{REGEX}"]["value"] == "0.67"
    assert tiles["evaluation_tokens"]["value"] == "150"

    tiles, response = page(root, f"{RANGE}&agent={other.pk}")
    assert not [key for key in tiles if key.startswith("score:")]
    assert "No run started in the range has a live score" in tiles["live_score"]["hint"]
    assert tiles["evaluation_tokens"]["value"] == "0"
    assert not [key for key in response.context["charts"] if key.startswith("live_score:")]


def test_other_filters_narrow_the_scores_as_they_narrow_the_runs(root, scored, bob):
    tiles, _ = page(root, f"{RANGE}&user=bob")
    assert "live_score" in tiles and f"score:{REGEX}" not in tiles


def test_staff_see_evaluation_figures_only_with_its_permissions(staff, scored):
    client = Client()
    client.force_login(staff)
    tiles, response = page(client)
    assert not [key for key in tiles if "score" in key or key.startswith("evaluation")]
    assert not [key for key in response.context["charts"] if key.startswith("live_score")]

    grant_evals(staff, "view_score")
    tiles, _ = page(client)
    assert f"score:{REGEX}" in tiles and "evaluation_tokens" not in tiles

    grant_evals(staff, "view_experiment")
    tiles, _ = page(client)
    assert "evaluation_tokens" in tiles


def grant_evals(user, codename: str) -> None:
    from django.contrib.auth.models import Permission

    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="evals_app", codename=codename)
    )
    grant(user)  # forgets the permissions the user object remembers
