"""Datasets that feed agents: their accepted items are shown, as few-shot examples, to everyone
who chats with the agent. So every item shown must have been accepted by a person, and a rule
that adds items as accepted without review may not meet such a dataset.

Every door that saves a rule (the dataset's admin page) or points an agent at a dataset (the
agent's admin page, POST and PATCH /api/agents) asks here, so they refuse alike: the chat
app's doors through the hooks this app fills (`datasets_app.hooks`, `datasets_app.admin.hooks`).
"""

from __future__ import annotations

from typing import Any

from datasets_app.models import Dataset, DatasetRule, ItemStatus
from sessions_app.models import Agent
from sessions_app.services.access import NotFound

WHY = (
    "its examples are shown to everyone who chats with the agent, so each must be accepted "
    "by a person."
)


class UnreviewedExamples(ValueError):
    """An agent would be fed items that no person accepted."""


def agents_fed_by(dataset_id: Any) -> list[str]:
    """The names of the agents that take examples from the dataset, whatever their count: the
    count can be raised later without the dataset being named again."""
    names = Agent.objects.filter(fewshot_dataset_id=dataset_id).values_list("name", flat=True)
    return sorted(names)


def accepting_rules(dataset_id: Any) -> list[DatasetRule]:
    """The dataset's rules that add items as accepted, active or not: switching one back on
    goes through the rule's door, but a rule is cheaper to fix before than to find after."""
    rules = DatasetRule.objects.filter(dataset_id=dataset_id, status=ItemStatus.ACCEPTED)
    return list(rules.select_related("agent").order_by("pk"))


def check_rule(dataset_id: Any, status: str) -> None:
    """Refuse a rule that would add items as accepted to a dataset feeding an agent."""
    if status != ItemStatus.ACCEPTED or dataset_id is None:
        return
    fed = agents_fed_by(dataset_id)
    if fed:
        raise UnreviewedExamples(
            f"A rule cannot add items as accepted here: this dataset gives few-shot examples "
            f"to {_names(fed)}, and {WHY} Let the rule add them as pending and review them."
        )


def check_agent_dataset(dataset_id: Any) -> None:
    """What POST and PATCH /api/agents ask of a `fewshot_dataset_id`: an unknown dataset is a
    404 (like an unknown agent_id when creating a session), one with a rule that skips review a
    409 (this app's API handler answers UnreviewedExamples)."""
    if dataset_id is not None and not Dataset.objects.filter(pk=dataset_id).exists():
        raise NotFound
    check_feed(dataset_id)


def check_feed(dataset_id: Any) -> None:
    """Refuse to point an agent at a dataset with a rule that accepts items without review."""
    if dataset_id is None:
        return
    rules = accepting_rules(dataset_id)
    if rules:
        name = Dataset.objects.filter(pk=dataset_id).values_list("name", flat=True).first()
        shown = "; ".join(f"“{rule}”" for rule in rules)
        raise UnreviewedExamples(
            f"The dataset “{name}” has a rule that adds items as accepted without review "
            f"({shown}); {WHY} Change the rule to add items as pending, or delete it, first."
        )


def _names(names: list[str]) -> str:
    quoted = [f"“{name}”" for name in names]
    if len(quoted) == 1:
        return f"the agent {quoted[0]}"
    return f"the agents {', '.join(quoted[:-1])} and {quoted[-1]}"
