"""An item's conversation as every format starts from it: metadata left out, the correction
applied, tool-call arguments as JSON strings, each turn's rating kept aside for weights, and
the text redacted when asked."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datasets_app.models import DatasetItem
from datasets_app.services.snapshot import conversation

Text = Callable[[str], str]


@dataclass
class Turn:
    message: dict[str, Any]  # OpenAI-shaped: role, content, tool_calls?, tool_call_id?
    rating: int | None = None

    @property
    def role(self) -> str:
        return str(self.message.get("role", ""))

    @property
    def content(self) -> str:
        return str(self.message.get("content") or "")

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self.message.get("tool_calls") or []


def dumps(value: Any) -> str:
    """One JSON text, the same bytes for the same value every time."""
    return json.dumps(value, ensure_ascii=False)


def canonical(value: Any) -> Any:
    """The value with its objects' keys sorted: PostgreSQL's jsonb keeps keys in its own order
    and SQLite in the order written, and an export must be the same bytes on both."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def arguments_object(arguments: Any) -> Any:
    """Tool-call arguments as a value, for formats that nest them; text that is not JSON is
    kept as text."""
    if not isinstance(arguments, str):
        return canonical(arguments if arguments is not None else {})
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def _strings(value: Any, text: Text) -> Any:
    """The value with every string in it (object keys too) passed through `text`."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(str(key)): _strings(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [_strings(item, text) for item in value]
    return value


def written_arguments(arguments: Any, text: Text) -> str:
    """Tool-call arguments as OpenAI sends them, a JSON string, with `text` applied to the
    strings inside them only, so redaction leaves them valid JSON; arguments that are not JSON
    are redacted as text."""
    if not isinstance(arguments, str):
        return dumps(canonical(_strings(arguments if arguments is not None else {}, text)))
    try:
        value = json.loads(arguments)
    except ValueError:
        return text(arguments)
    shown = _strings(value, text)
    # Unchanged arguments keep the bytes they were sent with.
    return arguments if shown == value else dumps(canonical(shown))


def _call(call: Any, text: Text) -> Any:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call  # reported by the checks, exported as it was
    function = call["function"]
    return {
        "id": str(call.get("id") or ""),
        "type": call.get("type") or "function",
        "function": {
            "name": str(function.get("name") or ""),
            "arguments": written_arguments(function.get("arguments"), text),
        },
    }


def turns(item: DatasetItem, text: Text) -> list[Turn]:
    """The item's turns as exported (see the module docstring)."""
    ratings = [m.get("rating") if isinstance(m, dict) else None for m in item.messages]
    out = []
    corrected = item.corrected_answer
    for index, message in enumerate(conversation(item.messages, corrected)):
        shaped: dict[str, Any] = {"role": message["role"], "content": text(message["content"])}
        if message.get("tool_calls"):
            shaped["tool_calls"] = [_call(call, text) for call in message["tool_calls"]]
        if message.get("tool_call_id"):
            shaped["tool_call_id"] = message["tool_call_id"]
        # A reviewer's correction is the answer to learn, whatever the original was rated.
        replaced = bool(corrected) and index == len(ratings) - 1 and message["role"] == "assistant"
        rating = None if replaced else ratings[index]
        out.append(Turn(shaped, rating if rating in (1, -1) else None))
    return out


def used_tools(item: DatasetItem, shown: list[Turn]) -> list[dict[str, Any]]:
    """The item's tool specs, when one of its turns calls a tool."""
    return canonical(list(item.tools or [])) if any(turn.calls for turn in shown) else []


def split_at_last_user(shown: list[Turn]) -> list[Turn]:
    """The context a preference pair answers: every turn up to the last user turn."""
    last = max((i for i, turn in enumerate(shown) if turn.role == "user"), default=-1)
    return shown[: last + 1]
