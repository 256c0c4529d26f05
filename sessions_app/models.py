"""Parley's data: agents, sessions of runs, their messages, and every call made to a model."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from sessions_app.ids import SESSION_ID_MAX_LENGTH, new_session_id
from sessions_app.usernames import AccountUsernameValidator


def CASCADE_LEAN(collector: Any, field: models.Field, sub_objs: Any, using: str) -> None:
    """CASCADE reading of each row only the columns its deletion's record is written from
    (the model's `kept_when_deleted`; services.deleted): as listeners see their deletion,
    Django would otherwise read whole sessions and runs, their texts and states."""
    # Historical models (in migrations) have no such list: they cascade as usual.
    kept = getattr(sub_objs.model, "kept_when_deleted", None)
    models.CASCADE(collector, field, sub_objs.only(*kept) if kept else sub_objs, using)


# Else Django reads the whole rows once to learn whether there are any, before calling it.
CASCADE_LEAN.lazy_sub_objs = True  # type: ignore[attr-defined]


class User(AbstractUser):
    # Django's field with ':' allowed, which sign-up refuses: see usernames.py.
    username_validator = AccountUsernameValidator()
    username = models.CharField(
        _("username"),
        max_length=150,
        unique=True,
        help_text=_("Required. 150 characters or fewer. Letters, digits and @/./+/-/_ only."),
        validators=[username_validator],
        error_messages={"unique": _("A user with that username already exists.")},
    )
    allow_training = models.BooleanField(
        default=True,
        help_text="Whether this user's conversations may be exported to train models.",
    )


class ImportedIdentity(models.Model):
    """The account a user of an imported database has here, so each later import of the same
    `source` finds it again, whatever the account is called by then (services/agno_import)."""

    source = models.CharField(max_length=255, help_text="The database imported from.")
    external_user_id = models.CharField(max_length=150, help_text="The user's id there.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_user_id"], name="imported_identity_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.external_user_id} of {self.source}"


class FewShotOrder(models.TextChoices):
    NEWEST = "newest", "newest first"
    BEST = "best", "best rated first"


class Agent(models.Model):
    agent_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100)
    model = models.CharField(max_length=200, help_text="Model name sent to the LLM endpoint.")
    instructions = models.TextField(blank=True, help_text="{key} is filled from session state.")
    add_history_to_context = models.BooleanField(default=True)
    num_history_runs = models.PositiveIntegerField(default=3)
    num_history_messages = models.PositiveIntegerField(null=True, blank=True)
    search_session_history = models.BooleanField(default=False)
    num_history_sessions = models.PositiveIntegerField(default=2)
    enable_session_summaries = models.BooleanField(default=False)
    session_state = models.JSONField(default=dict, blank=True, help_text="Initial session state.")
    add_session_state_to_context = models.BooleanField(default=False)
    enable_agentic_state = models.BooleanField(
        default=False, help_text="Offer the model a tool to change the session state."
    )
    add_past_sessions_to_context = models.BooleanField(
        default=False,
        help_text="For models without function calling: put the past sessions that "
        "search_session_history would offer as a tool into the system message instead.",
    )
    # Few-shot: accepted items of a dataset sent before the history as example turns.
    fewshot_dataset = models.ForeignKey(
        "datasets_app.Dataset",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Send accepted examples from this dataset before the history.",
    )
    fewshot_count = models.PositiveSmallIntegerField(
        default=3, validators=[MaxValueValidator(20)], help_text="How many examples."
    )
    fewshot_order = models.CharField(
        max_length=10, choices=FewShotOrder.choices, default=FewShotOrder.NEWEST
    )
    is_default = models.BooleanField(default=False)
    listed = models.BooleanField(
        default=True,
        help_text="Offered to everyone for new chats. Agents made by import_agno are not, until "
        "staff list them: their sessions still work for their owners.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="one_default_agent"
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def shows_examples(self) -> bool:
        """Whether runs of this agent are sent other people's conversations as examples."""
        return self.fewshot_dataset_id is not None and self.fewshot_count > 0


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


ACTIVE_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)


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


METRIC_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "time_to_first_token",
    "duration",
    "tokens_per_second",
    "usage_estimated",
    "cost",
)


class Run(TokenMetrics):
    run_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=CASCADE_LEAN, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=CASCADE_LEAN, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    position = models.PositiveIntegerField(help_text="1-based order of the run in its session.")
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.PENDING)
    input = models.TextField()
    content = models.TextField(blank=True)
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
        *("session", "user", "agent", "model", "status", "created_at"),
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


class CallKind(models.TextChoices):
    CHAT = "chat"
    SUMMARY = "summary"
    TITLE = "title"


class _ForgetsText(models.QuerySet):
    """Model calls losing their run or session: the UPDATE that clears the link clears the
    conversation's text (what the call was sent, its error) in the same statement, so the text
    goes whatever order Django runs a deletion's updates in (one filtered by the link that an
    earlier one cleared would match nothing)."""

    def update(self, **kwargs: Any) -> int:
        return super().update(**kwargs, sent_messages=None, error="")


def KEEP_USAGE(collector: Any, field: models.Field, sub_objs: Any, using: str) -> None:
    """on_delete of a model call's run and session: the call stays, so its tokens and cost stay
    counted, but loses its link and the conversation's text."""
    calls = _ForgetsText(model=sub_objs.model, query=sub_objs.query.chain(), using=using)
    collector.add_field_update(field, None, calls)


KEEP_USAGE.lazy_sub_objs = True  # type: ignore[attr-defined]  # as SET_NULL: no rows fetched


class _CallManager(models.Manager["LLMCall"]):
    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[LLMCall]:
        objs = list(objs)
        for call in objs:
            call.keep_run_id()
        return super().bulk_create(objs, *args, **kwargs)


class LLMCall(TokenMetrics):
    """One request to a model; every token and timing total is summed from these rows. A call
    outlives its session and run (KEEP_USAGE): deleting a conversation leaves its usage."""

    run = models.ForeignKey(Run, null=True, on_delete=KEEP_USAGE, related_name="llm_calls")
    # The run's id as a plain value, kept when the run is deleted: runs are counted from it.
    run_uuid = models.UUIDField(null=True, blank=True, editable=False)
    session = models.ForeignKey(Session, null=True, on_delete=KEEP_USAGE, related_name="llm_calls")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=10, choices=CallKind.choices, default=CallKind.CHAT)
    model = models.CharField(max_length=200)
    model_provider = models.CharField(max_length=50, blank=True)
    ok = models.BooleanField(default=True)
    error = models.TextField(blank=True)
    # What the model was sent (system message, history, tool results), for staff to read.
    sent_messages = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = _CallManager()

    class Meta:
        ordering = ["-created_at"]
        # A user's token total (the admin's user list) is read from the index alone.
        indexes = [models.Index(fields=["user", "total_tokens"], name="llmcall_user_tokens")]

    def __str__(self) -> str:
        return f"{self.kind} call to {self.model}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.keep_run_id()
        super().save(*args, **kwargs)

    def keep_run_id(self) -> None:
        """Copy the run's id to `run_uuid`, where it outlives the run; every insert calls it."""
        if self.run_uuid is None:
            self.run_uuid = self.run_id


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to tell it.")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="From this moment the token answers 401; empty: never."
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name or 'token'} ({self.prefix}…)"

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class LoginFailure(models.Model):
    """A refused sign-in; the login throttle counts these by username and by client address."""

    username = models.CharField(max_length=150)
    address = models.CharField(max_length=45, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["username", "created_at"], name="loginfailure_user_time"),
            models.Index(fields=["address", "created_at"], name="loginfailure_address_time"),
        ]

    def __str__(self) -> str:
        return f"failed sign-in as {self.username!r} from {self.address or '?'}"


class DeletedSession(models.Model):
    """A session deleted within an hour of being made: the limit on new sessions per minute
    still counts it (services.ratelimit), so deleting gives no allowance back. Older rows are
    of no use to the limit and are pruned now and then."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"], name="deletedsession_user_time")]

    def __str__(self) -> str:
        return f"session of user {self.user_id} made at {self.created_at:%Y-%m-%d %H:%M:%S}"


# Daily rollups: per-UTC-day sums of runs and calls, made once a day is closed (nothing about it
# changes any more) so the dashboard reads a few rows per day instead of every run and call.
# Their keys point at users and agents without a database constraint and outlive them: usage
# already spent stays counted when a user, session or run is deleted later.
def _unchecked(to: type[models.Model] | str, **extra: object) -> models.ForeignKey:
    return models.ForeignKey(
        to, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+", **extra
    )


class RolledDay(models.Model):
    """A closed UTC day whose runs and calls are summed in the rollups below; its row is the
    claim that makes one process, and only one, roll the day up."""

    day = models.DateField(primary_key=True)
    rolled_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.day.isoformat()


class _DayRow(models.Model):
    day = models.DateField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.day.isoformat()}"


class RunDay(_DayRow):
    """Runs started on `day`, and ratings given on `day`, per session, model and status."""

    session_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH)
    user = _unchecked(settings.AUTH_USER_MODEL)
    agent = _unchecked(Agent)
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=12, choices=RunStatus.choices)
    started = models.PositiveIntegerField(default=0)
    rated_up = models.PositiveIntegerField(default=0)
    rated_down = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "session_id", "user", "agent", "model", "status"],
                name="run_day_unique",
            )
        ]


class CallDay(_DayRow):
    """Model calls made on `day`, per kind, model, agent and user: their tokens and cost."""

    kind = models.CharField(max_length=10, choices=CallKind.choices)
    model = models.CharField(max_length=200)
    agent = _unchecked(Agent, null=True)
    user = _unchecked(settings.AUTH_USER_MODEL)
    # Named apart from LLMCall's columns, so the sums read from them can take those names.
    made = models.PositiveIntegerField(default=0)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    spent = models.DecimalField(max_digits=16, decimal_places=6, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "kind", "model", "agent", "user"], name="call_day_unique"
            )
        ]


class LatencyDay(_DayRow):
    """How many chat calls of `day` had a time (first token or duration) in `bucket`
    (services.rollups.histogram), so percentiles can be read without the calls."""

    field = models.CharField(max_length=20)
    bucket = models.IntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "field", "bucket"], name="latency_day_unique")
        ]


class DeletedRun(models.Model):
    """What the usage figures count of a run that was deleted (alone or with its session): when
    it started, how it ended and how it was rated, without a word of it. Written as the run is
    deleted (services.deleted); the dashboard and the rollups count these beside the runs."""

    run_id = models.UUIDField(primary_key=True, editable=False)
    session_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    agent = _unchecked(Agent)
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=12, choices=RunStatus.choices)
    created_at = models.DateTimeField()
    feedback_rating = models.SmallIntegerField(null=True, blank=True)
    feedback_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["created_at"], name="deletedrun_created"),
            # The limit on runs per minute counts a user's latest.
            models.Index(fields=["user", "created_at"], name="deletedrun_user_time"),
            models.Index(
                fields=["feedback_at"],
                condition=Q(feedback_at__isnull=False),
                name="deletedrun_feedback_at",
            ),
        ]

    def __str__(self) -> str:
        return f"deleted run {self.run_id}"
