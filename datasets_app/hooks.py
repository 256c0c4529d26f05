"""Where datasets plug into the chat app, which never imports this app: rules hear of ratings
through its `run_rated` signal, and the engine asks this app for few-shot examples through its
example source. The admin's actions and panels are added by `datasets_app.admin.hooks`."""

from __future__ import annotations

from datasets_app.services import fewshot, rules
from sessions_app.services import examples
from sessions_app.signals import run_rated


def connect() -> None:
    """Called once by the AppConfig's ready(); connecting again changes nothing."""
    run_rated.connect(rules.on_run_rated, dispatch_uid="datasets_app.rules")
    examples.set_example_source(fewshot.DatasetExamples())
