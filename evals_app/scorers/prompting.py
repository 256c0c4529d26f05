"""What the judges are shown, and how their answers are read: a conversation as plain text, and
the JSON verdict found wherever the model put it (alone, fenced, or after some words)."""

from __future__ import annotations

import json
import re
from typing import Any

_ROLES = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}


def transcript(conversation: list[dict[str, Any]]) -> str:
    """The turns as "User: …" / "Assistant: …" paragraphs; a tool call as the call it was."""
    lines = []
    for message in conversation:
        who = _ROLES.get(str(message.get("role")), str(message.get("role")).title())
        text = str(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                text += f"\n[calls {function.get('name')}({function.get('arguments') or ''})]"
        lines.append(f"{who}: {text.strip()}")
    return "\n\n".join(lines) if lines else "(no earlier turns)"


def section(title: str, text: str) -> str:
    return f"## {title}\n{text.strip() or '(empty)'}"


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in the text, in order, wherever it starts."""
    decoder = json.JSONDecoder()
    found, at = [], text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        at = text.find("{", end)
    return found


def labelled(text: str, *labels: str) -> str | None:
    """The value after the first "Label: " line of the text for any label (case ignored)."""
    names = "|".join(re.escape(label) for label in labels)
    match = re.search(rf"^\W*(?:{names})\W*[:=]\s*(.+)$", text, re.IGNORECASE | re.MULTILINE)
    return match.group(1).strip().strip("*\"'").strip() if match else None
