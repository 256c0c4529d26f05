"""Agents as OpenAI models: each named by a readable slug of its name (its id where two share
one), and found by that slug, its name or its id."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils.text import slugify

from openai_app.errors import unknown_model
from sessions_app.models import Agent, User
from sessions_app.services.access import NotFound, agents_for_user, get_agent_for_user


def model_ids(agents: list[Agent]) -> dict[Any, str]:
    """Each agent's model id: its slug, unless another of `agents` has the same slug."""
    slugs = {agent.pk: slugify(agent.name) for agent in agents}
    taken = Counter(slugs.values())
    return {pk: slug if slug and taken[slug] == 1 else str(pk) for pk, slug in slugs.items()}


def models_for(user: User) -> list[dict[str, Any]]:
    """`GET /v1/models`'s data: the agents the caller may use."""
    agents = list(agents_for_user(user).order_by("name", "pk"))
    ids = model_ids(agents)
    return [_model(agent, ids[agent.pk]) for agent in agents]


def model_named(user: User, model: str) -> dict[str, Any]:
    """`GET /v1/models/{model}`: the agent `model` names, as the list shows it."""
    wanted = agent_for_model(user, model)
    agents = list(agents_for_user(user))
    if all(agent.pk != wanted.pk for agent in agents):  # a session's unlisted agent
        agents.append(wanted)
    return _model(wanted, model_ids(agents)[wanted.pk])


def _model(agent: Agent, model_id: str) -> dict[str, Any]:
    created = int(agent.created_at.timestamp())
    return {"id": model_id, "object": "model", "created": created, "owned_by": "parley"}


def agent_for_model(user: User, model: str) -> Agent:
    """The agent a request's `model` names; OpenAIError 404 when the caller has none of it."""
    try:
        wanted = uuid.UUID(model)
    except ValueError:
        wanted = None
    if wanted is not None:
        try:
            return get_agent_for_user(user, wanted)
        except (NotFound, PermissionDenied):  # told apart, they would let ids be probed
            raise unknown_model(model) from None
    agents = list(agents_for_user(user))
    ids = model_ids(agents)
    key = model.strip().lower()
    for agent in agents:
        if key in (ids[agent.pk], agent.name.strip().lower()):
            return agent
    raise unknown_model(model)


def named_by(agent: Agent, model: str) -> bool:
    """Whether `model` names this agent (its id, slug or name), asking the database nothing."""
    key = model.strip().lower()
    return key in (str(agent.pk), slugify(agent.name), agent.name.strip().lower())
