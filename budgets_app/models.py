"""A budget: at most so many tokens, so much cost (USD) or so many runs per day, week or month,
for one person, for a group or for everyone, on every agent or on one."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from budgets_app.periods import Period


class Measure(models.TextChoices):
    TOKENS = "tokens"
    COST = "cost", "Cost (USD)"
    RUNS = "runs"


class Budget(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="One person's budget. Leave user and group empty for everyone.",
    )
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    agent = models.ForeignKey(
        "sessions_app.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Only what is used with this agent; empty: every agent.",
    )
    shared = models.BooleanField(
        default=False,
        help_text="For a group or everyone: one budget for all of them together. "
        "Off: the limit is each person's.",
    )
    measure = models.CharField(max_length=6, choices=Measure.choices)
    period = models.CharField(max_length=5, choices=Period.choices)
    limit = models.DecimalField(max_digits=18, decimal_places=6, validators=[MinValueValidator(0)])
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["measure", "period", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True) | Q(group__isnull=True),
                name="budget_user_or_group",
            ),
            models.CheckConstraint(
                condition=Q(user__isnull=True) | Q(shared=False), name="budget_user_not_shared"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.amount_text()} per {self.period}, {self.whom()}"

    def clean(self) -> None:
        if self.user_id and self.group_id:
            raise ValidationError("A budget is for a user or for a group, not both.")
        if self.user_id and self.shared:
            raise ValidationError({"shared": "A person's budget is theirs alone."})
        if self.measure in (Measure.TOKENS, Measure.RUNS) and self.limit is not None:
            if self.limit != self.limit.to_integral_value():
                raise ValidationError({"limit": f"A number of {self.measure} is whole."})

    def whom(self) -> str:
        """Who it is for, in words: "alice", "each of group staff", "everyone together"."""
        if self.user_id:
            who = str(self.user)
        elif self.group_id:
            who = f"{'group' if self.shared else 'each of group'} {self.group}"
        else:
            who = "everyone together" if self.shared else "each person"
        return f"{who} on agent {self.agent}" if self.agent_id else who

    def amount_text(self) -> str:
        return amount_text(self.measure, self.limit)


def amount_text(measure: str, amount: object) -> str:
    """An amount of a measure in words: "10,000 tokens", "$4.20", "30 runs"."""
    if measure == Measure.COST:
        return f"${float(amount):,.2f}"  # type: ignore[arg-type]
    count = int(amount)  # type: ignore[call-overload]
    return f"{count:,} {measure if count != 1 else measure.removesuffix('s')}"
