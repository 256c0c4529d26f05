"""/api/experiments: staff make, watch, cancel, rescore an experiment and read its report, each as
far as their permissions on experiments go (view, add, change); a 422 lists every problem."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from evals_app.models import Experiment
from evals_app.runner import run_experiment
from evals_app.scorers import spec_key
from tests.evals import kit
from tests.support.apiclient import api_client, asgi_client
from tests.support.roles import grant
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def viewer(django_user_model):
    user = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    return api_client(grant(user, "view_experiment"))


@pytest.fixture
def runner_staff(django_user_model):
    user = django_user_model.objects.create_user("lead", password="x", is_staff=True)
    return api_client(grant(user, *READS, "view_experiment", "add_experiment", "change_experiment"))


# What replaying a dataset through agents reads.
READS = ("view_dataset", "view_datasetitem", "view_agent")


@pytest.fixture
def setup(db):
    baseline, candidate = kit.versions()
    dataset = kit.dataset_of(3)
    return {"dataset": dataset, "baseline": baseline, "candidate": candidate}


def body(setup, **fields):
    return {
        "dataset_id": str(setup["dataset"].pk),
        "versions": [str(setup["baseline"].pk), str(setup["candidate"].pk)],
        "scorers": ["contains", {"name": "regex", "pattern": "\\d+"}],
        **fields,
    }


def post(client, path, data=None):
    return client.post(path, json.dumps(data or {}), content_type="application/json")


def test_staff_who_may_add_make_an_experiment_and_it_is_queued(runner_staff, setup):
    answer = post(runner_staff, "/api/experiments", body(setup, repeats=2, name="brief or not"))

    assert answer.status_code == 201, answer.content
    made = answer.json()
    assert made["name"] == "brief or not" and made["status"] == "queued"
    assert made["baseline_id"] == str(setup["baseline"].pk)
    assert [v["version_id"] for v in made["versions"]] == body(setup)["versions"]
    assert [v["label"] for v in made["versions"]] == [
        setup["baseline"].label,
        setup["candidate"].label,
    ]
    assert made["scorers"] == [{"name": "contains"}, {"name": "regex", "pattern": "\\d+"}]
    assert made["progress"] == {
        "status": "queued",
        "total": 12,
        "done": 0,
        "errors": 0,
        "scores_done": 0,
        "scores_total": 0,
        "scoring": [
            {"scorer": "contains", "done": 0, "total": 0},
            {"scorer": spec_key({"name": "regex", "pattern": "\\d+"}), "done": 0, "total": 0},
        ],
        "used_tokens": 0,
        "used_cost": 0.0,
        "budget_tokens": None,
        "budget_cost": None,
    }
    assert made["created_by"] == "lead"


def test_agents_give_their_live_versions_and_the_first_is_the_baseline(runner_staff, setup):
    judge = kit.a_judge()
    agents = [str(judge.pk), str(setup["baseline"].agent_id)]
    answer = post(
        runner_staff, "/api/experiments", {**body(setup, agents=agents), "versions": None}
    )

    assert answer.status_code == 201, answer.content
    made = answer.json()
    assert made["baseline_id"] == str(judge.live_version_id)
    assert {v["agent_name"] for v in made["versions"]} == {"Judge", "Assistant"}


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        ({"versions": []}, [("versions", "An experiment compares at least two versions.")]),
        (
            {"dataset_id": str(uuid.uuid4()), "scorers": ["nope"], "repeats": 3},
            [("dataset_id", "No such dataset."), ("scorers", "Unknown scorer {'name': 'nope'}")],
        ),
        ({"baseline": str(uuid.uuid4())}, [("baseline", "The baseline must be one of")]),
        ({"agents": []}, [("versions", "Give either `versions` (version ids) or `agents`.")]),
        ({"scorers": ["nope", "exact"]}, [("scorers", "Unknown scorer {'name': 'nope'}")]),
        ({"split": "validation"}, [("dataset_id", "has no accepted item in its validation")]),
        ({"scorers": ["needs_a_judge"]}, [("scorers", "needs a judge agent")]),
    ],
)
def test_what_cannot_be_made_answers_422_listing_the_problems(
    runner_staff, setup, changes, problems, judged_scorer
):
    answer = post(runner_staff, "/api/experiments", body(setup, **changes))

    assert answer.status_code == 422, answer.content
    found = [(p["loc"][-1], p["msg"]) for p in answer.json()["detail"]]
    assert len(found) == len(problems)
    for (field, message), (wanted_field, wanted) in zip(found, problems, strict=True):
        assert field == wanted_field and wanted in message
    assert not Experiment.objects.exists()


@pytest.mark.parametrize(
    "changes", [{"repeats": 6}, {"split": "dev"}, {"concurrency": 0}, {"budget_cost": -1}]
)
def test_values_out_of_range_are_refused_by_the_schema(runner_staff, setup, changes):
    answer = post(runner_staff, "/api/experiments", body(setup, **changes))
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"][0] == "body"


@pytest.fixture
def judged_scorer():
    with kit.a_scorer_that_needs_a_judge():
        yield


def an_experiment(setup, **fields) -> Experiment:
    from evals_app.experiments import create_experiment

    return create_experiment(
        dataset=setup["dataset"],
        versions=[setup["baseline"], setup["candidate"]],
        baseline=setup["baseline"],
        scorers=["contains"],
        **fields,
    )


def test_each_door_asks_its_permission(viewer, alice, setup):
    experiment = an_experiment(setup)
    one = f"/api/experiments/{experiment.pk}"

    assert viewer.get("/api/experiments").json()["meta"]["total_count"] == 1
    assert viewer.get(one).json()["progress"]["total"] == 6
    assert viewer.get(f"{one}/report").status_code == 200
    refusals = [
        (post(viewer, "/api/experiments", body(setup)), "add experiment"),
        (post(viewer, f"{one}/cancel"), "change experiment"),
        (post(viewer, f"{one}/rescore", {"scorers": ["exact"]}), "change experiment"),
        (api_client(alice).get("/api/experiments"), "view experiment"),
        (api_client(alice).get(f"{one}/report"), "view experiment"),
    ]
    for answer, right in refusals:
        assert answer.status_code == 403
        assert answer.json() == {"detail": f"You need the “{right}” permission."}
    missing = f"/api/experiments/{uuid.uuid4()}"
    assert viewer.get(missing).status_code == 404
    assert viewer.get(f"{missing}/report").json() == {"detail": "Not found."}


@pytest.mark.parametrize(
    ("rights", "missing"),
    [
        (("add_experiment", *READS), "view experiment"),  # it would be made, then not shown
        (("add_experiment", "view_experiment", "view_agent"), "view dataset"),
        (("add_experiment", "view_experiment", "view_dataset", "view_agent"), "view dataset item"),
        (("add_experiment", "view_experiment", "view_dataset", "view_datasetitem"), "view agent"),
    ],
)
def test_making_one_takes_every_right_it_uses_and_nothing_is_made_without(
    django_user_model, setup, rights, missing
):
    user = django_user_model.objects.create_user("maker", password="x", is_staff=True)
    answer = post(api_client(grant(user, *rights)), "/api/experiments", body(setup))
    assert answer.status_code == 403
    assert answer.json() == {"detail": f"You need the “{missing}” permission."}
    assert not Experiment.objects.exists()


def test_a_cancel_ends_a_queued_experiment(runner_staff, setup):
    experiment = an_experiment(setup)

    answer = post(runner_staff, f"/api/experiments/{experiment.pk}/cancel")

    assert answer.status_code == 200
    assert answer.json()["status"] == "cancelled" and answer.json()["cancel_requested"]


def test_a_stopped_experiment_goes_on_with_a_new_budget(runner_staff, setup):
    experiment = an_experiment(setup, budget_tokens=10)
    Experiment.objects.filter(pk=experiment.pk).update(status="budget", error="Stopped at it.")
    one = f"/api/experiments/{experiment.pk}"

    answer = post(runner_staff, f"{one}/resume", {"budget_tokens": 5000})

    assert answer.status_code == 200
    assert (answer.json()["status"], answer.json()["budget_tokens"]) == ("queued", 5000)
    assert post(runner_staff, f"{one}/resume", {"budget_tokens": -1}).status_code == 422
    Experiment.objects.filter(pk=experiment.pk).update(status="completed")
    assert post(runner_staff, f"{one}/resume").json()["status"] == "completed"


def test_cancelling_an_ended_experiment_changes_nothing(runner_staff, setup):
    experiment = an_experiment(setup)
    Experiment.objects.filter(pk=experiment.pk).update(status="completed")

    answer = post(runner_staff, f"/api/experiments/{experiment.pk}/cancel")

    assert answer.status_code == 200
    assert (answer.json()["status"], answer.json()["cancel_requested"]) == ("completed", False)


def test_a_rescore_adds_scorers_and_refuses_unknown_ones(runner_staff, setup):
    experiment = an_experiment(setup)
    path = f"/api/experiments/{experiment.pk}/rescore"

    refused = post(runner_staff, path, {"scorers": ["nope"]})
    added = post(runner_staff, path, {"scorers": ["contains", "exact"]})

    assert refused.status_code == 422
    assert added.status_code == 200
    assert added.json()["scorers"] == [{"name": "contains"}, {"name": "exact"}]


def test_the_report_comes_as_json_and_as_a_csv_download(viewer, setup, upstream):
    experiment = an_experiment(setup)
    async_to_sync(run_experiment)(experiment.pk)
    path = f"/api/experiments/{experiment.pk}/report"

    as_json = viewer.get(path)
    as_csv = viewer.get(path, {"format": "csv"})

    assert as_json.status_code == 200 and as_json["Content-Type"].startswith("application/json")
    assert isinstance(as_json.json(), dict)
    assert as_csv.status_code == 200 and as_csv["Content-Type"].startswith("text/csv")
    assert as_csv["Content-Disposition"] == (
        f'attachment; filename="experiment-{experiment.pk}.csv"'
    )
    rows = list(csv.reader(io.StringIO(as_csv.content.decode())))
    assert len(rows) > 1


async def test_an_experiment_made_on_a_server_starts_there_at_once(
    setup, upstream, django_user_model
):
    @sync_to_async
    def lead():
        user = django_user_model.objects.create_user("lead", password="x", is_staff=True)
        return asgi_client(grant(user, *READS, "view_experiment", "add_experiment"))

    client = await lead()
    made = await client.post("/api/experiments", body(setup))
    assert made.status_code == 201
    path = f"/api/experiments/{made.json()['experiment_id']}"

    async def completed() -> bool:
        return (await client.get(path)).json()["status"] == "completed"

    await until(completed, "the experiment completed")
    watched = (await client.get(path)).json()["progress"]
    assert (watched["done"], watched["total"], watched["errors"]) == (6, 6, 0)
    # Every answer scored by both scorers, and said so.
    assert (watched["scores_done"], watched["scores_total"]) == (12, 12)
    assert [(s["done"], s["total"]) for s in watched["scoring"]] == [(6, 6), (6, 6)]
    assert len(upstream.requests) == 6
