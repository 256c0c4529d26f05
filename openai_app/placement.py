"""Where a completion's run goes: the agent its `model` names and the session it belongs to,
decided in the run's creation batch once the caller is known (the engine's RunOptions.place),
so that a completion costs one trip to the database, as a run of the REST API does. A request
answering a run's tool calls goes to that run (`paused_run`)."""

from __future__ import annotations

import uuid
from typing import Any

from openai_app import agents, conversation
from openai_app.errors import OpenAIError
from sessions_app import engine
from sessions_app.models import Agent, Run, Session, User
from sessions_app.services import statesize, tools
from sessions_app.services.access import NotFound, get_run_for_owner


def place(
    model: str,
    turns: conversation.Conversation,
    named: str | None,
    metadata: dict[str, Any],
    tool_names: frozenset[str],
    user: User,
    session: Session | None,
) -> engine.Placement:
    """`session`: the caller's session of the id `named`, as the engine read it with the
    batch's others; None when there is none of theirs yet."""
    if named is not None:
        conversation.check_session_id(named)
    if session is not None and agents.named_by(session.agent, model):
        # A conversation going on: its session knows its agent.
        check_tools(session.agent, tool_names)
        return engine.Placement(session.agent_id, session.session_id, session=session)
    agent = agents.agent_for_model(user, model)
    if session is not None:
        raise OpenAIError(
            400,
            f"The session {named} is a conversation with another agent ({session.agent.name}).",
            param="model",
        )
    check_tools(agent, tool_names)
    if not turns.earlier:
        # A first turn: its session is made with its run, as a run of the REST API's is.
        if named is not None:
            conversation.refuse_taken(named)
        statesize.check("metadata", metadata)
        return engine.Placement(agent.pk, None, metadata=metadata, new_id=named)
    if named is not None:
        found = conversation.named_anew(user, agent, turns, named, metadata)
    else:
        found = conversation.session_for(user, agent, turns, metadata)
    return engine.Placement(agent.pk, found.session_id, found.created)


def paused_run(
    user: User, model: str, named: str | None, run_id: uuid.UUID, tool_names: frozenset[str]
) -> Run:
    """The run whose tool calls a request answers: the caller's, with the agent its `model`
    names, in the session it names (if it names one)."""
    try:
        run = get_run_for_owner(user, run_id)
    except NotFound:
        raise no_such_run() from None
    if not agents.named_by(run.agent, model):
        raise OpenAIError(
            400,
            f"These tool calls were made by another agent ({run.agent.name}).",
            param="model",
        )
    if named is not None and named != run.session_id:
        raise OpenAIError(
            400, f"These tool calls were made in another session than {named}.", param="session_id"
        )
    check_tools(run.agent, tool_names)
    return run


def no_such_run() -> OpenAIError:
    message = "The tool messages answer calls of no run of yours."
    return OpenAIError(404, message, param="messages", code="tool_call_not_found")


def check_tools(agent: Agent, names: frozenset[str]) -> None:
    """A client's tool may not take the name of one of the agent's own."""
    own = {spec["function"]["name"] for spec in tools.tool_specs(agent)}
    taken = sorted(names & own)
    if taken:
        raise OpenAIError(
            400, f"The agent has a tool of its own named {taken[0]}: rename yours.", param="tools"
        )
