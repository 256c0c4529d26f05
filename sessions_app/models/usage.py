"""Every call made to a model, and what deleted runs and sessions leave behind for the counts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.ids import SESSION_ID_MAX_LENGTH
from sessions_app.models.conversations import (
    Agent,
    Run,
    RunSource,
    RunStatus,
    Session,
    TokenMetrics,
)
from sessions_app.models.deletion import KEEP_USAGE, unchecked_key


class CallKind(models.TextChoices):
    CHAT = "chat"
    SUMMARY = "summary"
    TITLE = "title"


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
        indexes = [
            models.Index(fields=["user", "total_tokens"], name="llmcall_user_tokens"),
            # A person's budget sums their calls since the period began.
            models.Index(fields=["user", "created_at"], name="llmcall_user_time"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} call to {self.model}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.keep_run_id()
        super().save(*args, **kwargs)

    def keep_run_id(self) -> None:
        """Copy the run's id to `run_uuid`, where it outlives the run; every insert calls it."""
        if self.run_uuid is None:
            self.run_uuid = self.run_id


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


class DeletedRun(models.Model):
    """What the usage figures count of a run that was deleted (alone or with its session): when
    it started, how it ended and how it was rated, without a word of it. Written as the run is
    deleted (usage.deleted); the dashboard and the rollups count these beside the runs."""

    run_id = models.UUIDField(primary_key=True, editable=False)
    session_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    agent = unchecked_key(Agent)
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=12, choices=RunStatus.choices)
    # The run's door (Run.source); blank for runs deleted before it was kept here.
    source = models.CharField(max_length=10, choices=RunSource.choices, blank=True)
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
