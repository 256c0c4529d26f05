"""A `POST /v1/chat/completions` body, read as OpenAI reads it: what Parley takes, what it
refuses (400, naming the parameter) and what it ignores as OpenAI-only (`store`, `service_tier`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from openai_app.errors import OpenAIError

ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Sent on to the model as they are, over the agent's own sampling settings.
PASSED_ON = ("temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty")
# Parameters of features Parley does not offer: refused, not silently dropped.
REFUSED = {
    "audio": "Audio output is not supported.",
    "modalities": "Only text output is supported.",
    "logprobs": "Log probabilities are not supported.",
    "top_logprobs": "Log probabilities are not supported.",
    "prediction": "Predicted outputs are not supported.",
    "functions": "Use `tools`: the older `functions` parameter is not supported.",
    "function_call": "Use `tool_choice`: the older `function_call` parameter is not supported.",
}


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    sampling: dict[str, Any] = field(default_factory=dict)
    user: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None


def invalid(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def parse(raw: bytes) -> ChatRequest:
    try:
        body = json.loads(raw or b"")
    except ValueError:
        raise invalid("The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise invalid("The body must be a JSON object.")
    _refuse_unsupported(body)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid("you must provide a model parameter", "model")
    tools = _tools(body.get("tools"))
    if not isinstance(body.get("parallel_tool_calls", True), bool):
        raise invalid("`parallel_tool_calls` must be a boolean.", "parallel_tool_calls")
    return ChatRequest(
        model=model.strip(),
        messages=_messages(body.get("messages")),
        stream=_flag(body, "stream"),
        include_usage=_include_usage(body),
        sampling=_sampling(body),
        user=_text(body, "user"),
        metadata=_metadata(body.get("metadata")),
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
    )


def _refuse_unsupported(body: dict[str, Any]) -> None:
    for name, message in REFUSED.items():
        value = body.get(name)
        if value not in (None, False, [], ["text"]):
            raise invalid(message, name, "unsupported_parameter")
    n = body.get("n")
    if n not in (None, 1):
        raise invalid("Only one choice per request is supported (n = 1).", "n", "unsupported_value")


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise invalid("`messages` must be a non-empty array.", "messages")
    found = []
    for n, message in enumerate(value):
        where = f"messages[{n}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise invalid(f"{where}: a message with a role of {', '.join(ROLES)}.", where)
        call_id = message.get("tool_call_id")
        if message["role"] == "tool" and not (isinstance(call_id, str) and call_id):
            raise invalid(
                f"{where}: a tool message names the call it answers (tool_call_id).", where
            )
        found.append({**message, "content": _content(message.get("content"), where)})
    return found


def _tools(value: Any) -> list[dict[str, Any]]:
    """The client's function tools, as the model is offered them."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("`tools` must be an array of tools.", "tools")
    found, names = [], set()
    for n, tool in enumerate(value):
        where = f"tools[{n}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise invalid(f"{where}: only tools of type `function` are supported.", where)
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            message = f"{where}.function.name: letters, digits, _ and - (up to 64 characters)."
            raise invalid(message, f"{where}.function.name")
        if name in names:
            raise invalid(f"{where}: two tools are named {name}.", f"{where}.function.name")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise invalid(f"{where}.function.parameters must be a JSON Schema object.", where)
        names.add(name)
        kept = {"name": name, "parameters": parameters}
        for extra in ("description", "strict"):
            if function.get(extra) is not None:
                kept[extra] = function[extra]
        found.append({"type": "function", "function": kept})
    return found


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> Any:
    if value is None:
        return None
    if not tools:
        raise invalid("`tool_choice` is only allowed when `tools` are given.", "tool_choice")
    if value in ("none", "auto", "required"):
        return value
    function = value.get("function") if isinstance(value, dict) else None
    named = function.get("name") if isinstance(function, dict) else None
    if not isinstance(value, dict) or value.get("type") != "function" or not isinstance(named, str):
        message = '`tool_choice`: "none", "auto", "required" or a function to call.'
        raise invalid(message, "tool_choice")
    if named not in {tool["function"]["name"] for tool in tools}:
        raise invalid(f"`tool_choice` names {named}, which is not one of `tools`.", "tool_choice")
    return {"type": "function", "function": {"name": named}}


def _content(value: Any, where: str) -> str:
    """A message's text: a string, or an array of text parts (images and files refused)."""
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, list):
        raise invalid(f"{where}.content must be a string or an array of parts.", f"{where}.content")
    texts = []
    for part in value:
        if not isinstance(part, dict) or part.get("type") != "text":
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            message = f"{where}: {kind} content is not supported; send text."
            raise invalid(message, f"{where}.content")
        texts.append(str(part.get("text") or ""))
    return "".join(texts)


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise invalid(f"`{name}` must be a boolean.", name)
    return bool(value)


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise invalid("`stream_options` must be an object.", "stream_options")
    if not body.get("stream"):
        raise invalid("`stream_options` is only allowed when `stream` is true.", "stream_options")
    return bool(options.get("include_usage"))


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    found = {name: body[name] for name in PASSED_ON if body.get(name) is not None}
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        if name in found and not _number(found[name]):
            raise invalid(f"`{name}` must be a number.", name)
    limit = body.get("max_completion_tokens")
    limit = body.get("max_tokens") if limit is None else limit
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise invalid("`max_tokens` must be a positive integer.", "max_tokens")
        found["max_tokens"] = limit
    stop = found.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise invalid("`stop` must be a string or an array of strings.", "stop")
    return found


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid(f"`{name}` must be a string.", name)
    return value or ""


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise invalid("`metadata` must be an object of string values.", "metadata")
    return value
