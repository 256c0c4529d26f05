"""Agents as people name them on the command line (create_api_token, evaluate): by id, or by a
name only one agent has."""

from __future__ import annotations

import uuid

from sessions_app.models import Agent


class UnknownAgent(ValueError):
    """Nothing, or more than one agent, answers to the name; the message says which."""


def agent_named(text: str) -> Agent:
    try:
        key: uuid.UUID | None = uuid.UUID(text)
    except ValueError:
        key = None
    if key is not None and (found := Agent.objects.filter(pk=key).first()) is not None:
        return found
    named = list(Agent.objects.filter(name=text)[:2])
    if len(named) > 1:
        ids = ", ".join(str(a.pk) for a in Agent.objects.filter(name=text).only("pk"))
        raise UnknownAgent(f"Several agents are named “{text}”; give one's id: {ids}.")
    if not named:
        known = ", ".join(Agent.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise UnknownAgent(f"No agent named “{text}” (agents: {known}).")
    return named[0]
