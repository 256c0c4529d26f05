"""The export formats: each turns one item into its lines (JSONL) or rows (CSV)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from datasets_app.export.turns import (
    Text,
    Turn,
    arguments_object,
    dumps,
    split_at_last_user,
    turns,
    used_tools,
)
from datasets_app.models import DatasetItem, ItemSource
from sessions_app.services.spreadsheet import safe_cell

# Pair items only make sense as preferences; every other format leaves them out.
CONVERSATIONS = ~Q(source=ItemSource.PAIR)
PREFERENCES = Q(source=ItemSource.PAIR) | ~Q(corrected_answer="")


@dataclass(frozen=True)
class Format:
    name: str
    render: Callable[[DatasetItem, Text], list[str]]
    items: Q
    extension: str = "jsonl"
    content_type: str = "application/jsonl; charset=utf-8"
    header: str = ""

    def filename(self, dataset: str, split: str | None) -> str:
        stem = f"{dataset}-{split}" if split else dataset
        if self.extension == self.name:
            return f"{stem}.{self.extension}"
        return f"{stem}.{self.name}.{self.extension}"


def _line(value: dict[str, Any]) -> str:
    return dumps(value) + "\n"


def openai_chat(item: DatasetItem, text: Text) -> list[str]:
    shown = turns(item, text)
    messages = []
    for turn in shown:
        message = dict(turn.message)
        if item.use_weights and turn.role == "assistant":
            message["weight"] = 0 if turn.rating == -1 else 1
        messages.append(message)
    line: dict[str, Any] = {"messages": messages}
    if tools := used_tools(item, shown):
        line["tools"] = tools
    return [_line(line)]


def openai_preference(item: DatasetItem, text: Text) -> list[str]:
    """A pair: the chosen answer (or its correction) over the losing one. A corrected item:
    the correction over the original answer."""
    shown = turns(item, text)
    preferred = text(item.final_answer)
    other = item.rejected_answer if item.source == ItemSource.PAIR else item.original_answer
    context: dict[str, Any] = {"messages": [turn.message for turn in split_at_last_user(shown)]}
    if tools := used_tools(item, shown):
        context["tools"] = tools
    line = {
        "input": context,
        "preferred_output": [{"role": "assistant", "content": preferred}],
        "non_preferred_output": [{"role": "assistant", "content": text(other)}],
    }
    return [_line(line)]


_SHAREGPT_FROM = {"system": "system", "user": "human", "assistant": "gpt", "tool": "observation"}


def _sharegpt_call(turn: Turn) -> str:
    calls = [
        {
            "name": call["function"]["name"],
            "arguments": arguments_object(call["function"]["arguments"]),
        }
        for call in turn.calls
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    ]
    return dumps(calls[0] if len(calls) == 1 else calls)


def sharegpt(item: DatasetItem, text: Text) -> list[str]:
    """LLaMA-Factory's sharegpt layout. Parallel tool results become one observation (a JSON
    list), since its turns must alternate."""
    shown = turns(item, text)
    conversations: list[dict[str, str]] = []
    results: list[str] = []
    for turn in shown:
        if turn.role == "tool":
            results.append(turn.content)
            continue
        if results:
            value = results[0] if len(results) == 1 else dumps(results)
            conversations.append({"from": "observation", "value": value})
            results = []
        if turn.calls:
            conversations.append({"from": "function_call", "value": _sharegpt_call(turn)})
        else:
            conversations.append(
                {"from": _SHAREGPT_FROM.get(turn.role, turn.role), "value": turn.content}
            )
    if results:
        conversations.append({"from": "observation", "value": dumps(results)})
    line: dict[str, Any] = {"conversations": conversations}
    if tools := used_tools(item, shown):
        line["tools"] = dumps(tools)
    return [_line(line)]


def hf_messages(item: DatasetItem, text: Text) -> list[str]:
    """A `messages` column as chat templates take it. Arguments stay JSON strings and `tools`
    is one JSON string on every line, so Arrow infers one schema however the tools differ."""
    shown = turns(item, text)
    return [
        _line({"messages": [t.message for t in shown], "tools": dumps(used_tools(item, shown))})
    ]


CSV_COLUMNS = [
    "item_id", "split", "source", "turn", "role", "content", "tool_calls", "tool_call_id",
    "rating", "weight",
]  # fmt: skip


def _csv(rows: list[list[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerows([[safe_cell(value) for value in row] for row in rows])
    return buffer.getvalue()


def csv_rows(item: DatasetItem, text: Text) -> list[str]:
    rows = []
    for index, turn in enumerate(turns(item, text)):
        assistant = turn.role == "assistant"
        weight = (0 if turn.rating == -1 else 1) if item.use_weights and assistant else None
        rows.append(
            [
                str(item.item_id), item.split, item.source, index, turn.role, turn.content,
                dumps(turn.calls) if turn.calls else "", turn.message.get("tool_call_id", ""),
                turn.rating, weight,
            ]
        )  # fmt: skip
    return [_csv(rows)]


FORMATS_BY_NAME: dict[str, Format] = {
    f.name: f
    for f in [
        Format("openai-chat", openai_chat, CONVERSATIONS),
        Format("openai-preference", openai_preference, PREFERENCES),
        Format("sharegpt", sharegpt, CONVERSATIONS),
        Format("hf-messages", hf_messages, CONVERSATIONS),
        Format(
            "csv",
            csv_rows,
            CONVERSATIONS,
            extension="csv",
            content_type="text/csv; charset=utf-8",
            header=_csv([CSV_COLUMNS]),
        ),
    ]
}
FORMATS: tuple[str, ...] = tuple(FORMATS_BY_NAME)
