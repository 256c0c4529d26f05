"""Agents, and the immutable versions their configurations go through.

Whatever changes what the model is sent or how it answers is versioned (VERSIONED_FIELDS): saving
an agent with a new configuration makes a new version, or finds the one it already was, and every
run records the version it used. A draft version is a configuration staff try in an experiment
before users chat with it; promoting it copies it onto the agent.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from django.db.models import Max, Q
from django.utils import timezone


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
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Days a session with this agent is kept after its last activity before "
        "manage.py purge_expired deletes it; empty: PARLEY_RETENTION_DAYS; 0: forever.",
    )
    fewshot_order = models.CharField(
        max_length=10, choices=FewShotOrder.choices, default=FewShotOrder.NEWEST
    )
    # Sampling: sent to the model only when set, so a provider's own defaults stand otherwise.
    temperature = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)]
    )
    top_p = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    max_tokens = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Longest answer."
    )
    # The version users chat with: the fields above as they are now (see AgentVersion).
    live_version = models.ForeignKey(
        "AgentVersion",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
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

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Saving a change to what the model is sent makes (or finds) the version it is."""
        with transaction.atomic(using=kwargs.get("using")):
            super().save(*args, **kwargs)
            version = AgentVersion.objects.of_config(self, config_of(self), live=True)
            if version.pk != self.live_version_id:
                self.live_version = version
                type(self).objects.filter(pk=self.pk).update(live_version=version)

    def sampling(self) -> dict[str, Any]:
        """The sampling settings the model is sent: only those set."""
        names = ("temperature", "top_p", "max_tokens")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    @property
    def shows_examples(self) -> bool:
        """Whether runs of this agent are sent other people's conversations as examples."""
        return self.fewshot_dataset_id is not None and self.fewshot_count > 0


# What a version fixes: every field that changes what the model is sent or how it answers.
VERSIONED_FIELDS = (
    "model",
    "instructions",
    "add_history_to_context",
    "num_history_runs",
    "num_history_messages",
    "search_session_history",
    "num_history_sessions",
    "enable_session_summaries",
    "session_state",
    "add_session_state_to_context",
    "enable_agentic_state",
    "add_past_sessions_to_context",
    "fewshot_dataset",
    "fewshot_count",
    "fewshot_order",
    "temperature",
    "top_p",
    "max_tokens",
)


def config_of(agent: Agent) -> dict[str, Any]:
    """The agent's versioned fields as plain JSON (a foreign key as its id, in text). Each value
    as its field reads it back (a temperature of 1 is 1.0), so an agent set from JSON and the
    same agent loaded later have one configuration, not two."""
    config = {}
    for name in VERSIONED_FIELDS:
        field = Agent._meta.get_field(name)
        value = field.to_python(getattr(agent, field.attname))
        config[name] = str(value) if field.is_relation and value is not None else value
    return config


def config_hash(config: dict[str, Any]) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class VersionQuerySet(models.QuerySet["AgentVersion"]):
    def of_config(self, agent: Agent, config: dict[str, Any], *, live: bool) -> AgentVersion:
        """The agent's version with this configuration, made when it has none yet (numbered
        after the last). A draft that goes live is promoted, not copied."""
        digest = config_hash(config)
        found = self.filter(agent_id=agent.pk, config_hash=digest).order_by("number").first()
        if found is None:
            last = self.filter(agent_id=agent.pk).aggregate(last=Max("number"))["last"] or 0
            found = self.create(
                agent_id=agent.pk,
                number=last + 1,
                config=config,
                config_hash=digest,
                is_draft=not live,
                promoted_at=timezone.now() if live else None,
            )
        elif live and found.is_draft:
            found.is_draft = False
            found.promoted_at = timezone.now()
            found.save(update_fields=["is_draft", "promoted_at"])
        return found


class AgentVersion(models.Model):
    """One configuration an agent had or may have; never changed once made."""

    version_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField(help_text="1, 2, … in the order they were made.")
    config = models.JSONField(help_text="The versioned fields, as they were.")
    config_hash = models.CharField(max_length=64)
    # A draft is tried in experiments; users never chat with it until it is promoted.
    is_draft = models.BooleanField(default=False)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    promoted_at = models.DateTimeField(null=True, blank=True)

    objects = VersionQuerySet.as_manager()

    class Meta:
        ordering = ["agent", "number"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "number"], name="agentversion_number_unique"),
        ]
        indexes = [models.Index(fields=["agent", "config_hash"], name="agentversion_config")]

    def __str__(self) -> str:
        draft = " (draft)" if self.is_draft else ""
        return f"{self.agent.name} v{self.number}{draft}"

    @property
    def label(self) -> str:
        return f"v{self.number}{' draft' if self.is_draft else ''}"

    def as_agent(self) -> Agent:
        """An unsaved Agent configured as this version, for building what the model is sent
        (context, few-shot examples, sampling) exactly as a run of it would be."""
        agent = self.agent
        fields = {}
        for name in VERSIONED_FIELDS:
            field = Agent._meta.get_field(name)
            fields[field.attname] = self.config.get(name, field.get_default())
        return Agent(
            agent_id=agent.pk,
            name=agent.name,
            listed=agent.listed,
            live_version_id=self.pk,
            **fields,
        )
