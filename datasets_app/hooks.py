"""Where datasets plug into the chat app, which never imports this app: rules hear of ratings
through its `run_rated` signal."""

from __future__ import annotations

from datasets_app.services import rules
from sessions_app.signals import run_rated


def connect() -> None:
    """Called once by the AppConfig's ready(); connecting again changes nothing."""
    run_rated.connect(rules.on_run_rated, dispatch_uid="datasets_app.rules")
