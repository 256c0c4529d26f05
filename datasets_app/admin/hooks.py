"""What datasets add to the chat app's admin pages, through its extension points
(sessions_app.admin.extensions): "Add to dataset…" on the session and run lists, the panels
beside a transcript's runs and on a run's page, and the agent's few-shot section."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpRequest

from datasets_app.admin import collect, panel
from datasets_app.models import Dataset
from datasets_app.services import feeds
from sessions_app.admin.extensions import (
    Action,
    FormSection,
    Panel,
    add_action,
    add_form_section,
    add_panel,
)
from sessions_app.models import Agent, Run, Session

SHOWN_TO_EVERYONE = (
    "The examples are other people's conversations, shown to everyone who chats with this "
    "agent. Only items a person accepted are sent (never those a rule accepted before anyone "
    "reviewed them, nor those of users who turned off training use), with e-mail addresses, "
    "phone numbers and keys masked as an export's redaction masks them."
)

PANELS = "admin/datasets_app/panels/"


def _check_feed(dataset: Dataset | None) -> None:
    """The agent's page refuses, on the field, a dataset with a rule that skips review."""
    try:
        feeds.check_feed(dataset.pk if dataset else None)
    except feeds.UnreviewedExamples as exc:
        raise ValidationError(str(exc)) from exc


FEWSHOT = FormSection(
    title="Few-shot examples",
    fields=("fewshot_dataset", "fewshot_count", "fewshot_order"),
    description="Accepted items of a dataset, sent as example turns before the history of "
    f"every run. {SHOWN_TO_EVERYONE}",
    help_texts={
        "fewshot_dataset": "Its accepted items are shown to everyone who chats with this agent. "
        "A dataset with a rule that adds items as accepted is refused.",
    },
    checks={"fewshot_dataset": _check_feed},
)


def _may_collect(request: HttpRequest) -> bool:
    return collect.may_collect(request.user)


def install() -> None:
    """Called once, as this app's admin modules load."""
    add_action(Session, Action(collect.add_sessions_to_dataset, _may_collect))
    add_action(Run, Action(collect.add_runs_to_dataset, _may_collect))
    session_templates = {
        "transcript": f"{PANELS}session_transcript.html",
        "transcript_run": f"{PANELS}session_run.html",
        "end": f"{PANELS}session_end.html",
    }
    add_panel("session", Panel(panel.session_context, session_templates))
    run_templates = {"body": f"{PANELS}run_body.html", "end": f"{PANELS}run_end.html"}
    add_panel("run", Panel(panel.run_context, run_templates))
    add_form_section(Agent, FEWSHOT)
