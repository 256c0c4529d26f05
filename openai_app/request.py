"""A `POST /v1/chat/completions` body, read as OpenAI reads it: what Parley takes, what it
refuses (400, naming the parameter) and what it ignores as OpenAI-only (`store`, `service_tier`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openai_app.errors import OpenAIError

ROLES = ("system", "developer", "user", "assistant", "tool")
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
    return ChatRequest(
        model=model.strip(),
        messages=_messages(body.get("messages")),
        stream=_flag(body, "stream"),
        include_usage=_include_usage(body),
        sampling=_sampling(body),
        user=_text(body, "user"),
        metadata=_metadata(body.get("metadata")),
        tools=_list(body, "tools"),
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
        found.append({**message, "content": _content(message.get("content"), where)})
    return found


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


def _list(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise invalid(f"`{name}` must be an array of objects.", name)
    return value
