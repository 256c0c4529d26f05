"""Where a completion's run goes: the agent its `model` names and the session it belongs to,
decided in the run's creation batch once the caller is known (the engine's RunOptions.place),
so that a completion costs one trip to the database, as a run of the REST API does."""

from __future__ import annotations

from typing import Any

from openai_app import agents, conversation
from openai_app.errors import OpenAIError
from sessions_app import engine
from sessions_app.models import User


def place(
    model: str,
    turns: conversation.Conversation,
    named: str | None,
    metadata: dict[str, Any],
    user: User,
) -> engine.Placement:
    session = conversation.existing(user, named) if named is not None else None
    if session is not None and agents.named_by(session.agent, model):
        # A conversation going on: its session knows its agent.
        return engine.Placement(session.agent_id, session.session_id)
    agent = agents.agent_for_model(user, model)
    if session is not None:
        raise OpenAIError(
            400,
            f"The session {named} is a conversation with another agent ({session.agent.name}).",
            param="model",
        )
    if named is not None:
        found = conversation.named_anew(user, agent, turns, named, metadata)
    else:
        found = conversation.session_for(user, agent, turns, metadata)
    return engine.Placement(agent.pk, found.session_id, found.created)
