"""Asking a judge: an agent's live version, asked as any other call to the model is made.

The judge answers with its version's model and sampling settings; where the version sets no
temperature it is asked at 0, and the embedded model with a fixed seed, so the same question
gets the same verdict as far as the model allows. Its tokens are priced as runs are.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings

from sessions_app.engine.dbthread import in_db_thread
from sessions_app.llm import client as llm
from sessions_app.llm.errors import LLMError
from sessions_app.llm.usage import price
from sessions_app.models import Agent, AgentVersion, config_of

SAMPLING = ("temperature", "top_p", "max_tokens")


class JudgeError(Exception):
    """The judge could not be asked (unreachable, an HTTP error): the score is an error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def ask_judge(
    judge_agent: Agent, messages: list[dict[str, Any]], schema: dict[str, Any] | None = None
) -> tuple[str, int, Decimal | None, Any]:
    """The judge's answer to `messages`: (text, tokens, cost, the version id that answered).
    `schema`: the JSON Schema of the verdict, which the embedded model is held to (llama.cpp
    turns it into a grammar, without which a small model rarely writes the verdict asked)."""
    version = await _live_version(judge_agent)
    config = version.config if version is not None else config_of(judge_agent)
    model = config.get("model") or settings.LLM_MODEL
    set_ones = {name: config.get(name) for name in SAMPLING if config.get(name) is not None}
    sampling = {"temperature": 0.0, **set_ones}
    try:
        answer = await llm.completion(
            model, messages, sampling=sampling, embedded=_embedded_options(schema)
        )
    except LLMError as exc:
        raise JudgeError(f"The judge {judge_agent.name} could not be asked: {exc.message}") from exc
    cost = price(answer.model, answer.usage)
    return answer.text, answer.usage.total_tokens, cost, version.pk if version else None


def _embedded_options(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Sent to llama.cpp only: a configured endpoint may refuse parameters it lacks."""
    options: dict[str, Any] = {"seed": 0}
    if schema is not None:
        options["response_format"] = {"type": "json_object", "schema": schema}
    return options


async def _live_version(agent: Agent) -> AgentVersion | None:
    """The agent's live version, read once per agent object: a batch of verdicts asks the same
    judge many times."""
    if agent.live_version_id is None:
        return None
    if not Agent.live_version.is_cached(agent):
        agent.live_version = await in_db_thread(_version)(agent.live_version_id)
    return agent.live_version


def _version(version_id: Any) -> AgentVersion:
    return AgentVersion.objects.get(pk=version_id)
