"""Sessions of runs, each made of messages."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from sessions_app.ids import SESSION_ID_MAX_LENGTH, new_session_id
from sessions_app.models.agents import Agent, AgentVersion
from sessions_app.models.deletion import CASCADE_LEAN


class NameSource(models.TextChoices):
    FIRST_MESSAGE = "first_message"
    MODEL = "model"
    USER = "user"


class SessionSource(models.TextChoices):
    PARLEY = "parley", "Parley"
    AGNO = "agno", "Agno import"


class Session(models.Model):
    # A new session's id is a UUID string; an imported one keeps the id it had (see ids.py).
    session_id = models.CharField(
        primary_key=True, max_length=SESSION_ID_MAX_LENGTH, default=new_session_id, editable=False
    )
    session_type = models.CharField(max_length=20, default="agent", editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=CASCADE_LEAN, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="sessions")
    session_name = models.CharField(max_length=200, blank=True)
    # Who named it: a user's rename is never overwritten by a generated title.
    name_source = models.CharField(
        max_length=16, choices=NameSource.choices, default=NameSource.FIRST_MESSAGE
    )
    session_state = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(null=True, blank=True)
    source = models.CharField(
        max_length=10,
        choices=SessionSource.choices,
        default=SessionSource.PARLEY,
        editable=False,
        help_text="Where the session was made.",
    )
    # Staff's choice: left alone by the retention period's purge (manage.py purge_expired).
    kept = models.BooleanField(
        default=False, help_text="Kept past the retention period: never purged as expired."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # What a deletion reads of it (CASCADE_LEAN): what its DeletedSession is made of.
    kept_when_deleted = ("user", "created_at")

    class Meta:
        indexes = [
            models.Index(fields=["user", "-updated_at"], name="session_user_recent"),
            # The admin lists every session by last activity, and drills down by creation.
            models.Index(fields=["updated_at", "session_id"], name="session_recent"),
            models.Index(fields=["created_at"], name="session_created"),
        ]

    def __str__(self) -> str:
        return self.session_name or str(self.session_id)


class RunStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    CANCELLED = "CANCELLED"
    INTERRUPTED = "INTERRUPTED"
    # Waiting for its client to run the tools the model called (Agno's paused run): the
    # OpenAI door's client tools. Not active: no process holds it, nothing to reap.
    PAUSED = "PAUSED"


ACTIVE_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)


class RunSource(models.TextChoices):
    """The door a run came in by; blank on runs from before doors were recorded."""

    CHAT = "chat", "Chat page"
    API = "api", "REST API"
    OPENAI = "openai", "OpenAI API"
    IMPORT = "import", "Agno import"
    # Turns an OpenAI client sent as a new session's history: no model was asked for them.
    HISTORY = "history", "Client's history"


class TokenMetrics(models.Model):
    """The metric columns shared by a run and by each model call it is derived from."""

    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    time_to_first_token = models.FloatField(null=True, blank=True, help_text="seconds")
    duration = models.FloatField(null=True, blank=True, help_text="seconds")
    usage_estimated = models.BooleanField(default=False)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def tokens_per_second(self) -> float | None:
        if not self.output_tokens or not self.duration:
            return None
        generating = self.duration - (self.time_to_first_token or 0.0)
        return round(self.output_tokens / (generating if generating > 0 else self.duration), 2)


TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
)
METRIC_FIELDS = (
    *TOKEN_FIELDS,
    "time_to_first_token",
    "duration",
    "tokens_per_second",
    "usage_estimated",
    "cost",
)


def usage_known(status: str, metrics: Mapping[str, Any]) -> bool:
    """Whether a run's figures were reported by the model or counted by Parley. A run still
    going has none yet; one whose process stopped under it (marked INTERRUPTED, or CANCELLED,
    by the liveness check) or whose end was never stored holds zeros that nobody counted:
    no model call of it was recorded, so it has no duration."""
    if status in ACTIVE_STATUSES:
        return False
    return (
        bool(metrics.get("usage_estimated"))
        or metrics.get("duration") is not None
        or any(metrics.get(name) for name in TOKEN_FIELDS)
    )


class Run(TokenMetrics):
    run_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=CASCADE_LEAN, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=CASCADE_LEAN, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    # The configuration the run was made with; null only for runs made before versions.
    agent_version = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    position = models.PositiveIntegerField(help_text="1-based order of the run in its session.")
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.PENDING)
    input = models.TextField()
    content = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=RunSource.choices, blank=True)
    model = models.CharField(max_length=200, blank=True)
    model_provider = models.CharField(max_length=50, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Liveness: which process runs it and when that process last vouched for it.
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # The stream sequence number that `content` reflects, so a reader can resume after it.
    content_seq = models.PositiveIntegerField(default=0)
    feedback_rating = models.SmallIntegerField(
        null=True, blank=True, choices=[(1, "Good"), (-1, "Bad")]
    )
    feedback_comment = models.TextField(blank=True)
    feedback_at = models.DateTimeField(null=True, blank=True)
    # Staff's judgement when curating, kept apart from the user's own feedback above.
    staff_rating = models.SmallIntegerField(
        null=True, blank=True, choices=[(1, "Good"), (-1, "Bad")]
    )
    staff_rated_at = models.DateTimeField(null=True, blank=True)
    # The session state as this run left it, so the state at any run can be looked up.
    session_state = models.JSONField(null=True, blank=True)
    # The dataset items sent to the model as few-shot examples, by item_id.
    fewshot_items = models.JSONField(default=list, blank=True)

    # What a deletion reads of it (CASCADE_LEAN): what its DeletedRun is made of.
    kept_when_deleted = (
        *("session", "user", "agent", "model", "status", "source", "created_at"),
        *("feedback_rating", "feedback_at"),
    )

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="run_position_unique"),
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["PENDING", "RUNNING"]),
                name="one_active_run_per_session",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
            # The rate limit and budgets count a person's latest runs.
            models.Index(fields=["user", "created_at"], name="run_user_time"),
            # The admin and the dashboard list and count runs by when they started, ratings by
            # when they were given.
            models.Index(fields=["created_at", "run_id"], name="run_created"),
            models.Index(fields=["status", "created_at", "run_id"], name="run_status_created"),
            # The slowest runs of a range, read in order of duration.
            models.Index(fields=["-duration", "-created_at"], name="run_slowest"),
            models.Index(
                fields=["feedback_at"],
                condition=Q(feedback_at__isnull=False),
                name="run_feedback_at",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.position} of {self.session_id}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def usage_known(self) -> bool:
        return usage_known(self.status, self.metrics())

    def metrics(self) -> dict[str, Any]:
        """The run's metrics as the API, its events and the pages show them."""
        metrics = {name: getattr(self, name) for name in METRIC_FIELDS}
        metrics["cost"] = float(self.cost) if self.cost is not None else None
        return metrics


class Role(models.TextChoices):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Message(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    order = models.PositiveSmallIntegerField(help_text="Order within the run.")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "order"], name="message_order_unique")
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

    @property
    def from_history(self) -> bool:
        return False
