"""`manage.py evaluate`: an experiment made and run in this process (no server needed), a
progress bar on stderr, the report on stdout; exit 1 when a gate fails (a regression beyond
noise with --fail-on-regression, a score under --min-score), 2 on arguments it cannot use.

Killed, it is taken up again with `--resume ID` (or by a server), without asking anything
twice that was answered."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any, TextIO

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count
from tqdm import tqdm

from evals_app import runner
from evals_app.experiments import ExperimentError, create_experiment
from evals_app.experiments import progress as progress_of
from evals_app.models import Experiment, ExperimentStatus, Trial, TrialStatus
from evals_app.names import Unknown, agent_named, dataset_named, version_named
from evals_app.report import build_report
from sessions_app.llm import pool

BAD_ARGUMENTS = 2
# What makes an experiment: given with --resume, they would say something it ignores.
DEFINING = (
    "dataset",
    "agent",
    "baseline",
    "repeats",
    "scorer",
    "judge",
    "split",
    "concurrency",
    "budget_tokens",
    "budget_cost",
    "name",
)


def bad(message: str) -> CommandError:
    return CommandError(message, returncode=BAD_ARGUMENTS)


class Command(BaseCommand):
    help = (
        "Compare agent versions on a dataset's accepted items: each item asked again of each "
        "version, scored; the report on stdout (progress on stderr)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", help="The dataset's name or id.")
        parser.add_argument(
            "--agent",
            action="append",
            help="An agent (name or id: its live version), NAME@v3 or NAME@draft; twice or more.",
        )
        parser.add_argument("--baseline", help="One of the --agent values; default the first.")
        parser.add_argument("--repeats", type=int, help="Answers per item and version, 1-5.")
        parser.add_argument(
            "--scorer",
            action="append",
            help='A scorer\'s name (contains) or its JSON ({"name": "regex", "pattern": "..."}).',
        )
        parser.add_argument("--judge", help="The agent (name or id) the judge scorers ask.")
        parser.add_argument("--split", help="Only the items of this split.")
        parser.add_argument("--concurrency", type=int, help="Answers asked at once, 1-100.")
        parser.add_argument("--budget-tokens", type=int, help="Stop starting answers past this.")
        parser.add_argument("--budget-cost", help="Stop starting answers past this cost (USD).")
        parser.add_argument("--name", help="What to call the experiment.")
        parser.add_argument("--resume", metavar="EXPERIMENT_ID", help="Go on with this one.")
        parser.add_argument(
            "--fail-on-regression",
            action="store_true",
            help="Exit 1 when a candidate is worse than the baseline beyond noise.",
        )
        parser.add_argument(
            "--min-score",
            type=float,
            help="Exit 1 when a candidate's mean is under this, on a scale of 0 to 1 for every "
            "scorer (a judge's 1 to 5 read as 0 to 1).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        experiment = self._resumed(options) if options["resume"] else self._created(options)
        self.stderr.write(
            f"Experiment {experiment.pk}; if it stops, go on with --resume {experiment.pk}."
        )
        ended = self._run(experiment)
        report = build_report(ended)
        self.stdout.write(report.to_text())
        self._say_why_answers_failed(ended)
        self._gate(ended, report, options)

    def _say_why_answers_failed(self, experiment: Experiment) -> None:
        """The distinct reasons answers failed, most frequent first: the report counts them."""
        failed = (
            Trial.objects.filter(experiment=experiment, status=TrialStatus.ERROR)
            .values("error")
            .annotate(n=Count("pk"))
            .order_by("-n")[:3]
        )
        for row in failed:
            self.stderr.write(f"{row['n']} answer(s) failed: {row['error']}")

    def _created(self, options: dict[str, Any]) -> Experiment:
        if not options["dataset"] or len(options["agent"] or ()) < 2:
            raise bad("Give --dataset and at least two --agent (or --resume EXPERIMENT_ID).")
        try:
            dataset = dataset_named(options["dataset"])
            versions = [version_named(text) for text in options["agent"]]
            baseline = versions[0]
            if options["baseline"]:
                baseline = version_named(options["baseline"])
            _need_endpoint()
            return create_experiment(
                dataset=dataset,
                versions=versions,
                baseline=baseline,
                repeats=options["repeats"] or 1,
                scorers=[_spec(text) for text in options["scorer"] or ()],
                judge=agent_named(options["judge"]) if options["judge"] else None,
                split=options["split"] or "",
                concurrency=options["concurrency"],
                budget_tokens=options["budget_tokens"],
                budget_cost=options["budget_cost"],
                name=options["name"] or "",
            )
        except (Unknown, ExperimentError) as exc:
            raise bad(str(exc)) from None

    def _resumed(self, options: dict[str, Any]) -> Experiment:
        given = [f"--{name.replace('_', '-')}" for name in DEFINING if options[name] is not None]
        if given:
            raise bad(f"--resume goes on with the experiment as it was made: leave out {given}.")
        _need_endpoint()
        try:
            experiment = Experiment.objects.get(pk=uuid.UUID(options["resume"]))
        except (ValueError, Experiment.DoesNotExist):
            raise bad(f"No experiment {options['resume']}.") from None
        runner.request(experiment)
        return experiment

    def _run(self, experiment: Experiment) -> Experiment:
        # The bar writes to the real stderr: Django's wrapper would add a newline to each redraw.
        bar_file: TextIO = getattr(self.stderr, "_out", sys.stderr)
        known = progress_of(experiment)
        with tqdm(total=known["total"], initial=known["done"], unit="answer", file=bar_file) as bar:

            def show(found: dict[str, Any]) -> None:
                bar.total = found["total"]
                bar.set_postfix(errors=found["errors"], tokens=found["used_tokens"], refresh=False)
                bar.update(found["done"] - bar.n)  # redrawn at most every tenth of a second

            try:
                return asyncio.run(_see_through(experiment.pk, show))
            except KeyboardInterrupt:
                # Cancelled, not left queued: a server would otherwise go on spending on it.
                runner.cancel(experiment)
                raise CommandError(
                    f"Stopped and cancelled; go on with --resume {experiment.pk}.", returncode=130
                ) from None

    def _gate(self, experiment: Experiment, report: Any, options: dict[str, Any]) -> None:
        if experiment.status != ExperimentStatus.COMPLETED:
            note = experiment.error or experiment.get_status_display()
            self.stderr.write(f"The experiment ended {experiment.status}: {note}")
        if experiment.status == ExperimentStatus.FAILED:
            raise CommandError(experiment.error or "The experiment failed.")
        gating = options["fail_on_regression"] or options["min_score"] is not None
        if gating and report.unvouched():
            raise CommandError("Cannot vouch for the candidates: " + "; ".join(report.unvouched()))
        if options["fail_on_regression"] and report.regressed:
            raise CommandError("A candidate is worse than the baseline beyond noise.")
        minimum = options["min_score"]
        if minimum is not None and report.below(minimum):
            raise CommandError(f"A score is under the minimum of {minimum}.")


def _need_endpoint() -> None:
    if not settings.LLM_BASE_URL:
        # Every answer would fail: the embedded model runs only inside `serve`.
        raise bad(
            "No model endpoint is configured: set LLM_BASE_URL to an OpenAI-compatible "
            "endpoint, or start the experiment from the admin or POST /api/experiments, "
            "where the server (and its embedded model) runs it."
        )


def _spec(text: str) -> dict[str, Any] | str:
    if not text.lstrip().startswith("{"):
        return text.strip()
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise bad(f"--scorer {text}: not JSON ({exc}).") from None
    if not isinstance(spec, dict):
        raise bad(f"--scorer {text}: a JSON object, please.")
    return spec


async def _see_through(experiment_id: Any, show: Any) -> Experiment:
    try:
        return await runner.run_experiment(experiment_id, show)
    finally:
        await pool.close_clients()  # the model clients' connections belong to this loop
