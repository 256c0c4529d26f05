"""An experiment's item and answers as the transcript shows turns: the model's text as sanitized
Markdown (never its raw HTML), everything else escaped."""

from __future__ import annotations

from typing import Any

from datasets_app.services.snapshot import EXAMPLE_NAMES, up_to_last_question
from evals_app.models import Trial
from sessions_app.admin import transcript
from sessions_app.models import Role


def _turn(message: dict[str, Any]) -> transcript.Turn:
    return transcript.turn(
        message.get("role", ""),
        message.get("content"),
        message.get("tool_calls"),
        message.get("tool_call_id", ""),
    )


def input_turns(trial: Trial) -> list[transcript.Turn]:
    """What the item asked, as every version was asked it: its history and user turn, without
    the system message (each version sends its own) or the answer it had. From the replay the
    trial was sent when the item has been deleted since."""
    item = trial.item
    if item is not None:
        messages = up_to_last_question(item.messages)
    else:
        messages = [m for m in trial.sent_messages or () if m.get("name") not in EXAMPLE_NAMES]
    return [_turn(m) for m in messages if m.get("role") != Role.SYSTEM]


def reference_turns(trial: Trial) -> list[transcript.Turn]:
    item = trial.item
    if item is None or not item.final_answer:
        return []
    return [transcript.turn(Role.ASSISTANT, item.final_answer)]


def answer_turns(trial: Trial | None) -> list[transcript.Turn]:
    if trial is None or not trial.content:
        return []
    return [transcript.turn(Role.ASSISTANT, trial.content)]
