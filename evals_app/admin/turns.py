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


def _asked(trial: Trial) -> list[dict[str, Any]]:
    """The item's conversation up to its last user turn; from the replay the trial was sent
    when the item has been deleted since."""
    item = trial.item
    if item is not None:
        return up_to_last_question(item.messages)
    return [m for m in trial.sent_messages or () if m.get("name") not in EXAMPLE_NAMES]


def input_turns(trial: Trial) -> list[transcript.Turn]:
    """What the item asked, as every version was asked it: its history and user turn, without
    the system message (each version sends its own) or the answer it had."""
    return [_turn(m) for m in _asked(trial) if m.get("role") != Role.SYSTEM]


def question(trial: Trial) -> str:
    """The item's last user turn as text (its first may be an earlier turn of a long
    conversation); empty when it has none."""
    asked = [m for m in _asked(trial) if m.get("role") == Role.USER]
    return str(asked[-1].get("content") or "") if asked else ""


def reference_turns(trial: Trial) -> list[transcript.Turn]:
    item = trial.item
    if item is None or not item.final_answer:
        return []
    return [transcript.turn(Role.ASSISTANT, item.final_answer)]


def answer_turns(trial: Trial | None) -> list[transcript.Turn]:
    if trial is None or not trial.content:
        return []
    return [transcript.turn(Role.ASSISTANT, trial.content)]
