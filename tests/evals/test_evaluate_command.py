"""`manage.py evaluate`: an experiment made and run by the command itself against the scripted
upstream, its report on stdout; the exit codes a CI gate reads; and, killed mid-way with SIGKILL,
taken up again with --resume without asking any stored answer twice."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evals_app.experiments import create_experiment
from evals_app.models import Experiment, Trial, TrialStatus
from testkit.upstream import Reply
from tests.conftest import ROOT, subprocess_env
from tests.evals import kit

pytestmark = pytest.mark.django_db(transaction=True)


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "evaluate", *args],
        cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def evaluate(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("evaluate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def questions(db):
    """Ten items; the live version (v1) and a draft (v2) of the default agent "Assistant"."""
    kit.versions()
    return kit.dataset_of(10)


def right_or_wrong(request) -> Reply:
    """The baseline answers with the item's reference; the candidate does not."""
    number = kit.asked(request).split()[-1].rstrip("?")
    good = kit.sent_by(request) == "baseline"
    return Reply(f"Answer {number}." if good else "No idea.")


AGENTS = ("--dataset", "questions", "--agent", "Assistant", "--agent", "Assistant@draft")


def test_it_runs_the_experiment_and_prints_the_report(questions, upstream):
    out, err = evaluate(*AGENTS, "--scorer", "contains", "--repeats", "2")

    experiment = Experiment.objects.get()
    assert experiment.status == "completed"
    assert Trial.objects.filter(experiment=experiment, status="completed").count() == 40
    assert len(upstream.requests) == 40
    assert f"--resume {experiment.pk}" in err
    assert out.strip() and "contains" in out.lower()


def test_a_regression_beyond_noise_fails_the_gate(questions, upstream):
    with kit.answering(upstream, right_or_wrong):
        evaluate(*AGENTS, "--scorer", "contains")
        with pytest.raises(CommandError) as failed:
            evaluate(*AGENTS, "--scorer", "contains", "--fail-on-regression")
    assert failed.value.returncode == 1
    assert "worse than the baseline" in str(failed.value)


def test_a_score_under_the_minimum_fails_the_gate(questions, upstream):
    with kit.answering(upstream, right_or_wrong):
        with pytest.raises(CommandError) as failed:
            evaluate(*AGENTS, "--scorer", "contains", "--min-score", "0.5")
        assert failed.value.returncode == 1
        # The baseline as the candidate too: nothing under the minimum, nothing worse.
        evaluate(
            "--dataset", "questions", "--agent", "Assistant", "--agent", "Assistant@draft",
            "--baseline", "Assistant@draft", "--scorer", "contains", "--min-score", "0",
        )  # fmt: skip


def candidate_fails(request) -> Reply:
    if kit.sent_by(request) == "baseline":
        return Reply("Answer " + kit.asked(request).split()[-1].rstrip("?") + ".")
    return Reply(status=500)


def test_a_candidate_whose_answers_failed_fails_the_gate(questions, upstream):
    # Its failed answers have no scores: its mean alone would say nothing is wrong.
    err = io.StringIO()
    with kit.answering(upstream, candidate_fails):
        with pytest.raises(CommandError) as failed:
            call_command(
                "evaluate", *AGENTS, "--scorer", "contains", "--fail-on-regression",
                "--min-score", "0", stdout=io.StringIO(), stderr=err,
            )  # fmt: skip
    assert failed.value.returncode == 1
    assert "10 answer(s) failed: " in err.getvalue()
    assert "Cannot vouch for the candidates: 10 answer(s) of Assistant v3 draft failed" in str(
        failed.value
    )


def test_without_a_model_endpoint_it_says_so_before_making_anything(questions, settings):
    settings.LLM_BASE_URL = ""
    with pytest.raises(CommandError) as refused:
        evaluate(*AGENTS, "--scorer", "contains")
    assert refused.value.returncode == 2
    assert "No model endpoint is configured" in str(refused.value)
    assert not Experiment.objects.exists()


def test_an_experiment_stopped_at_its_budget_fails_the_gate(questions, upstream):
    with pytest.raises(CommandError) as failed:
        evaluate(*AGENTS, "--scorer", "contains", "--budget-tokens", "1", "--concurrency", "1",
                 "--fail-on-regression")  # fmt: skip
    assert failed.value.returncode == 1
    assert "the experiment ended budget" in str(failed.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--dataset", "questions", "--agent", "Assistant"), "at least two --agent"),
        (("--dataset", "nope", "--agent", "A", "--agent", "B"), "No dataset named “nope”"),
        ((*AGENTS[:4], "--agent", "Nobody"), "No agent named “Nobody”"),
        ((*AGENTS[:4], "--agent", "Assistant@v9"), "has no version v9"),
        ((*AGENTS, "--scorer", "nope"), "Unknown scorer"),
        ((*AGENTS, "--scorer", '{"name": "regex"'), "not JSON"),
        ((*AGENTS, "--scorer", '{"name": "regex"}'), "regex: give a 'pattern'"),
        ((*AGENTS, "--split", "dev"), "Unknown split “dev”"),
        ((*AGENTS, "--repeats", "6"), "Repeats go from 1 to 5"),
        ((*AGENTS, "--baseline", "Judge"), "The baseline must be one of the versions"),
        (("--resume", "not-an-id"), "No experiment not-an-id"),
        (("--resume", "0" * 32, "--dataset", "questions"), "leave out ['--dataset']"),
    ],
)
def test_arguments_it_cannot_use_exit_2_saying_why(questions, upstream, args, message):
    kit.a_judge()
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        evaluate(*args)
    assert refused.value.returncode == 2


def test_the_exit_codes_are_the_processes(questions, upstream):
    refused = manage("--dataset", "questions", "--agent", "Assistant")
    assert refused.returncode == 2 and "at least two --agent" in refused.stderr
    with kit.answering(upstream, right_or_wrong):
        gated = manage(*AGENTS, "--scorer", "contains", "--fail-on-regression")
    assert gated.returncode == 1, gated.stderr
    assert "worse than the baseline" in gated.stderr
    assert "100%" in gated.stderr  # the progress bar
    assert gated.stdout.strip()


def slow(request) -> Reply:
    return Reply(f"Slowly: {kit.asked(request)}", first_delay=0.15)


def stopped_midway(answers: int, how: signal.Signals) -> tuple[int, str]:
    """`evaluate` in a process of its own, sent `how` once it stored `answers` answers: its
    exit code and stderr."""
    child = subprocess.Popen(
        [sys.executable, "manage.py", "evaluate", *AGENTS, "--concurrency", "2"],
        cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert wait_for(lambda: answered() >= answers), "no answers stored"
    finally:
        child.send_signal(how)
        _, err = child.communicate(timeout=30)
    return child.returncode, err


def test_killed_it_resumes_and_no_stored_answer_is_asked_twice(questions, upstream):
    with kit.answering(upstream, slow):
        stopped_midway(6, signal.SIGKILL)
        experiment = Experiment.objects.get()
        stored = stored_answers(experiment)
        assert experiment.status == "running"  # as the killed process left it

        resumed = manage("--resume", str(experiment.pk))

    assert resumed.returncode == 0, resumed.stderr
    experiment.refresh_from_db()
    assert experiment.status == "completed"
    assert Trial.objects.filter(status=TrialStatus.COMPLETED).count() == 20
    # Every answer stored before the kill was kept, and its question never asked again.
    assert stored.items() <= stored_answers(experiment).items()
    asks = kit.asks_per_trial(upstream.requests)
    assert len(asks) == 20
    assert all(asks[trial] == 1 for trial in stored)
    # Asked twice: only what was in flight as it was killed (at most its concurrency).
    assert sum(asks.values()) - 20 <= 2


def test_ctrl_c_cancels_it_and_resume_finishes_it(questions, upstream):
    with kit.answering(upstream, slow):
        code, err = stopped_midway(4, signal.SIGINT)
        experiment = Experiment.objects.get()
        assert code == 130, err
        assert f"Stopped and cancelled; go on with --resume {experiment.pk}" in err
        # Left cancelled, not queued: no server picks it up and spends on it unasked.
        assert experiment.status == "cancelled"
        assert Trial.objects.filter(status=TrialStatus.PENDING).exists()

        resumed = manage("--resume", str(experiment.pk))

    assert resumed.returncode == 0, resumed.stderr
    experiment.refresh_from_db()
    assert experiment.status == "completed"
    assert Trial.objects.filter(status=TrialStatus.COMPLETED).count() == 20


def test_two_processes_run_one_experiment_once(questions, upstream):
    baseline, candidate = kit.versions()
    experiment = create_experiment(
        dataset=questions, versions=[baseline, candidate], baseline=baseline, concurrency=2
    )
    command = [sys.executable, "manage.py", "evaluate", "--resume", str(experiment.pk)]
    env = subprocess_env(PARLEY_HEARTBEAT_INTERVAL="0.2")

    def slow(request) -> Reply:
        return Reply(f"Slowly: {kit.asked(request)}", first_delay=0.05)

    with kit.answering(upstream, slow):
        both = [
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        reports = [child.communicate(timeout=120)[0] for child in both]

    assert [child.returncode for child in both] == [0, 0]
    assert reports[0].strip() and reports[0] == reports[1]  # the one that waited, reported too
    asks = kit.asks_per_trial(upstream.requests)
    assert len(asks) == 20 and set(asks.values()) == {1}


def stored_answers(experiment: Experiment) -> dict[tuple[str, str], tuple[str, str]]:
    """(question, version) of each stored answer: its trial and its text."""
    found = {}
    completed = Trial.objects.filter(experiment=experiment, status=TrialStatus.COMPLETED)
    for trial in completed.select_related("item"):
        who = "baseline" if trial.version_id == experiment.baseline_id else "candidate"
        found[(trial.item.messages[-2]["content"], who)] = (str(trial.pk), trial.content)
    return found


def answered() -> int:
    return Trial.objects.filter(status=TrialStatus.COMPLETED).count()


def wait_for(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_report_on_stdout_is_the_reports_text(questions, upstream):
    out, _ = evaluate(*AGENTS, "--scorer", "exact")
    from evals_app.report import build_report

    assert out.strip() == build_report(Experiment.objects.get()).to_text().strip()
    assert json.dumps(build_report(Experiment.objects.get()).to_dict(), default=str)
