"""Curated datasets: snapshots of good conversations, reviewed by staff, exported for training
and fed back to agents as few-shot examples."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from sessions_app.ids import SESSION_ID_MAX_LENGTH


class Dataset(models.Model):
    dataset_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.SlugField(
        max_length=100, unique=True, help_text="Letters, digits, - and _; used on the command line."
    )
    description = models.TextField(blank=True)
    # The share of items that land in each split; the rest is train.
    validation_percent = models.PositiveSmallIntegerField(
        default=10, validators=[MaxValueValidator(100)]
    )
    test_percent = models.PositiveSmallIntegerField(default=10, validators=[MaxValueValidator(100)])
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(validation_percent__lte=100 - models.F("test_percent")),
                name="dataset_splits_fit",
            )
        ]

    def __str__(self) -> str:
        return self.name


class ItemStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class Split(models.TextChoices):
    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"


class ItemSource(models.TextChoices):
    RUN = "run", "one run"
    SESSION = "session", "a whole session"
    PAIR = "pair", "preference pair"
    EXPERIMENT = "experiment", "an experiment's answer"


class ItemQuerySet(models.QuerySet["DatasetItem"]):
    def trainable(self) -> ItemQuerySet:
        """Items whose owner allows training use. An owner deleted since cannot say so any
        more, so their items are left out too."""
        return self.filter(owner__allow_training=True)


class DatasetItem(models.Model):
    """One example: a snapshot of the conversation as it was when added. The source run and
    session may change or go away later; the snapshot does not."""

    item_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    source = models.CharField(max_length=10, choices=ItemSource.choices)
    # Where it came from: kept as plain ids too, so provenance outlives the rows.
    run = models.ForeignKey(
        "sessions_app.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source_run_id = models.UUIDField(null=True, blank=True)
    # Null, not "", when there is none, as the other provenance ids.
    source_session_id = models.CharField(  # noqa: DJ001
        max_length=SESSION_ID_MAX_LENGTH, null=True, blank=True
    )
    # For pairs: the run whose answer lost.
    other_run_id = models.UUIDField(null=True, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    agent = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    model = models.CharField(max_length=200, blank=True)
    # OpenAI-shaped messages, the final answer last; assistant turns may carry "rating".
    messages = models.JSONField()
    tools = models.JSONField(default=list, blank=True)
    corrected_answer = models.TextField(
        blank=True, help_text="The reviewer's version of the final answer; empty keeps it."
    )
    rejected_answer = models.TextField(blank=True, help_text="For a pair: the losing answer.")
    rating = models.SmallIntegerField(null=True, blank=True, help_text="The source run's rating.")
    # Weight 0 on assistant turns rated down, in exports that carry weights.
    use_weights = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=ItemStatus.choices, default="pending")
    split = models.CharField(max_length=10, choices=Split.choices)
    # Of the exported conversation (with its correction), to find the same one twice.
    content_hash = models.CharField(max_length=64, db_index=True)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    source_created_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "item_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "source_run_id"],
                condition=Q(source="run"),
                name="item_run_once",
            ),
            models.UniqueConstraint(
                fields=["dataset", "source_run_id", "other_run_id"],
                condition=Q(source="pair"),
                name="item_pair_once",
            ),
            models.UniqueConstraint(
                fields=["dataset", "source_session_id"],
                condition=Q(source="session"),
                name="item_session_once",
            ),
        ]
        indexes = [
            models.Index(fields=["dataset", "status", "created_at", "item_id"], name="item_export"),
        ]

    def __str__(self) -> str:
        first = next((m["content"] for m in self.messages if m.get("role") == "user"), "")
        return (first or "")[:60] or str(self.item_id)

    @property
    def final_answer(self) -> str:
        return self.corrected_answer or self.original_answer

    @property
    def original_answer(self) -> str:
        last = self.messages[-1] if self.messages else {}
        return str(last.get("content") or "") if last.get("role") == "assistant" else ""


class Rater(models.TextChoices):
    USER = "user", "the user"
    STAFF = "staff", "staff"
    EITHER = "either", "the user or staff"


class DatasetRule(models.Model):
    """ "Every run of agent X rated up": applied as runs are rated, to a sample of them."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rules")
    agent = models.ForeignKey(
        "sessions_app.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Empty: every agent.",
    )
    rating = models.SmallIntegerField(choices=[(1, "rated up"), (-1, "rated down")], default=1)
    rated_by = models.CharField(max_length=10, choices=Rater.choices, default=Rater.EITHER)
    sample_percent = models.PositiveSmallIntegerField(
        default=100, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    status = models.CharField(
        max_length=10,
        choices=ItemStatus.choices,
        default=ItemStatus.PENDING,
        help_text="The status its items start with.",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        who = self.agent.name if self.agent_id and self.agent else "any agent"
        word = "up" if self.rating == 1 else "down"
        return f"{who}, rated {word} by {self.get_rated_by_display()}, {self.sample_percent}%"
