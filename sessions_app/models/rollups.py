"""The dashboard's daily sums (rolled up ahead of its views)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions_app.ids import SESSION_ID_MAX_LENGTH
from sessions_app.models.conversations import Agent, RunStatus
from sessions_app.models.deletion import unchecked_key
from sessions_app.models.usage import CallKind

# Per-UTC-day sums of runs and calls, made once a day is closed (nothing about it changes any
# more) so the dashboard reads a few rows per day instead of every run and call.


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
    user = unchecked_key(settings.AUTH_USER_MODEL)
    agent = unchecked_key(Agent)
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
    agent = unchecked_key(Agent, null=True)
    user = unchecked_key(settings.AUTH_USER_MODEL)
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
    (usage.rollups.histogram), so percentiles can be read without the calls."""

    field = models.CharField(max_length=20)
    bucket = models.IntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "field", "bucket"], name="latency_day_unique")
        ]
