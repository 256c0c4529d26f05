"""Where datasets plug into the chat app, which never imports this app: rules hear of ratings
through its `run_rated` signal, and the engine asks this app for few-shot examples through its
example source. The admin's actions and panels are added by `datasets_app.admin.hooks`."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import pre_delete

from datasets_app.models import Dataset
from datasets_app.services import fewshot, rules
from sessions_app.models import Agent
from sessions_app.services import examples
from sessions_app.signals import run_rated


def connect() -> None:
    """Called once by the AppConfig's ready(); connecting again changes nothing."""
    run_rated.connect(rules.on_run_rated, dispatch_uid="datasets_app.rules")
    examples.set_example_source(fewshot.DatasetExamples())
    pre_delete.connect(_agents_lose_examples, sender=Dataset, dispatch_uid="datasets_app.agents")


def _agents_lose_examples(sender: Any, instance: Dataset, **kwargs: Any) -> None:
    """Agents taking examples from a dataset being deleted stop, through a save: a change of
    what they send is a new version (the key's SET_NULL alone would update the rows only)."""
    for agent in Agent.objects.filter(fewshot_dataset=instance):
        agent.fewshot_dataset = None
        agent.save()
