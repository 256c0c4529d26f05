"""Experiments (a dataset's items by agent versions by repeats), their trials (each answer, a run
of its own kind), the scores scorers and people give them, and the rules that score live runs."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from sessions_app.models import TokenMetrics


class ExperimentStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    BUDGET = "budget", "Stopped at its budget"
    FAILED = "failed"


FINISHED_STATUSES = (
    ExperimentStatus.COMPLETED,
    ExperimentStatus.CANCELLED,
    ExperimentStatus.BUDGET,
    ExperimentStatus.FAILED,
)


def default_concurrency() -> int:
    return settings.PARLEY_EVAL_CONCURRENCY


class Experiment(models.Model):
    experiment_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200, blank=True)
    dataset = models.ForeignKey(
        "datasets_app.Dataset", on_delete=models.PROTECT, related_name="experiments"
    )
    split = models.CharField(max_length=10, blank=True, help_text="Empty: every split.")
    versions = models.ManyToManyField("sessions_app.AgentVersion", related_name="experiments")
    baseline = models.ForeignKey(
        "sessions_app.AgentVersion", on_delete=models.PROTECT, related_name="+"
    )
    repeats = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(5)]
    )
    # Scorer specs, each {"name": …, and its options} (see evals_app.scorers).
    scorers = models.JSONField(default=list, blank=True)
    judge = models.ForeignKey(
        "sessions_app.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The agent that judges, for the judge scorers.",
    )
    concurrency = models.PositiveSmallIntegerField(
        default=default_concurrency, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    budget_cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # Spent so far, answers and judges together: what the budget is checked against.
    used_tokens = models.PositiveBigIntegerField(default=0)
    used_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    seed = models.PositiveIntegerField(default=0, help_text="For the intervals and blind pages.")
    status = models.CharField(
        max_length=10, choices=ExperimentStatus.choices, default=ExperimentStatus.QUEUED
    )
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Which process runs it and when that process last vouched for it: another resumes it
    # when the vouching stops (a killed server or command).
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="experiment_liveness")]
        permissions = [("rate_experiment", "Can rate an experiment's answers blind")]

    def __str__(self) -> str:
        return self.name or f"Experiment {str(self.experiment_id)[:8]}"


class TrialStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    ERROR = "error"


class Trial(TokenMetrics):
    """One answer of an experiment: an item replayed through a version, once per repeat. A run
    of its own kind: it belongs to no session, so no sidebar, history, dataset rule or user's
    usage ever sees it."""

    trial_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="trials")
    item = models.ForeignKey(
        "datasets_app.DatasetItem", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    item_uuid = models.UUIDField(help_text="The item's id, kept if the item is deleted.")
    version = models.ForeignKey(
        "sessions_app.AgentVersion", on_delete=models.PROTECT, related_name="trials"
    )
    repeat = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(
        max_length=10, choices=TrialStatus.choices, default=TrialStatus.PENDING
    )
    model = models.CharField(max_length=200, blank=True)
    content = models.TextField(blank=True)
    error = models.TextField(blank=True)
    sent_messages = models.JSONField(null=True, blank=True, help_text="What the model was sent.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "item_uuid", "repeat", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "item_uuid", "version", "repeat"], name="trial_once"
            ),
        ]
        indexes = [models.Index(fields=["experiment", "status"], name="trial_progress")]

    def __str__(self) -> str:
        return f"trial {self.repeat} of item {str(self.item_uuid)[:8]}"


class Score(models.Model):
    """One scorer's verdict on one answer: a trial's, or a live run's. `value` is on the
    scorer's scale (0 to 1 for the reference scorers, the rubric's for a judge; for the pairwise
    judge 1 win, 0.5 tie, 0 loss against the baseline); null with `error` when it failed."""

    trial = models.ForeignKey(
        Trial, null=True, blank=True, on_delete=models.CASCADE, related_name="scores"
    )
    run = models.ForeignKey(
        "sessions_app.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The scorer's key: its name, and a digest of its options when it has any.
    scorer = models.CharField(max_length=100)
    value = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    # For judges: who judged, and exactly what it was asked.
    judge_version = models.ForeignKey(
        "sessions_app.AgentVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    judge_prompt = models.JSONField(null=True, blank=True)
    judge_tokens = models.PositiveIntegerField(default=0)
    judge_cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(trial__isnull=False, run__isnull=True)
                | Q(trial__isnull=True, run__isnull=False),
                name="score_of_one_answer",
            ),
            models.UniqueConstraint(fields=["trial", "scorer"], name="score_trial_once"),
            models.UniqueConstraint(fields=["run", "scorer"], name="score_run_once"),
        ]
        indexes = [models.Index(fields=["scorer", "created_at"], name="score_by_scorer")]

    def __str__(self) -> str:
        shown = "error" if self.value is None else f"{self.value:g}"
        return f"{self.scorer}: {shown}"


class Choice(models.TextChoices):
    BASELINE = "baseline"
    CANDIDATE = "candidate"
    TIE = "tie"


class HumanVerdict(models.Model):
    """A person's choice between the baseline's and a candidate's answers to one item, shown
    blind: in an order drawn for them, labelled only A and B."""

    baseline_trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="+")
    candidate_trial = models.ForeignKey(
        Trial, on_delete=models.CASCADE, related_name="human_verdicts"
    )
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    choice = models.CharField(max_length=10, choices=Choice.choices)
    baseline_shown_first = models.BooleanField()
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["candidate_trial", "rater"], name="humanverdict_once_per_rater"
            )
        ]

    def __str__(self) -> str:
        return f"{self.rater} chose {self.choice}"


class EvalRule(models.Model):
    """Score a sample of an agent's completed runs in the background, after the answer."""

    agent = models.ForeignKey(
        "sessions_app.Agent", on_delete=models.CASCADE, related_name="eval_rules"
    )
    sample_percent = models.PositiveSmallIntegerField(
        default=10, validators=[MaxValueValidator(100)], help_text="Of completed runs; 0: none."
    )
    rated_down = models.BooleanField(default=False, help_text="Also every run rated down.")
    scorers = models.JSONField(default=list)
    judge = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.agent}: {self.sample_percent}% of runs"
