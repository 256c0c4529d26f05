"""Datasets, agents and agent versions as people name them on the command line: by name or id,
a version as `NAME@v3` (its number), `NAME@draft` (the agent's newest draft) or the agent alone
(its live version)."""

from __future__ import annotations

import uuid

from datasets_app.models import Dataset
from sessions_app.models import Agent, AgentVersion
from sessions_app.services.agent_names import UnknownAgent
from sessions_app.services.agent_names import agent_named as agents_named


class Unknown(ValueError):
    """Nothing, or more than one thing, answers to the name; the message says which."""


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def dataset_named(text: str) -> Dataset:
    key = _as_uuid(text)
    found = Dataset.objects.filter(pk=key).first() if key else None
    found = found or Dataset.objects.filter(name=text).first()
    if found is None:
        known = ", ".join(Dataset.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise Unknown(f"No dataset named “{text}” (datasets: {known}).")
    return found


def agent_named(text: str) -> Agent:
    try:
        return agents_named(text)
    except UnknownAgent as exc:
        raise Unknown(str(exc)) from None


def version_named(text: str) -> AgentVersion:
    """`text` names an agent (its live version) or, after an @, one of its versions."""
    name, at, which = text.rpartition("@")
    if not at or _names_an_agent(text):
        return _live(agent_named(text))
    agent = agent_named(name)
    versions = AgentVersion.objects.filter(agent=agent).select_related("agent")
    if which == "draft":
        found = versions.filter(is_draft=True).order_by("-number").first()
        if found is None:
            raise Unknown(f"The agent “{agent}” has no draft version.")
        return found
    number = which.removeprefix("v")
    if not number.isdigit():
        raise Unknown(f"“{which}” names no version: say v3, or draft.")
    found = versions.filter(number=int(number)).first()
    if found is None:
        raise Unknown(f"The agent “{agent}” has no version {which}.")
    return found


def _names_an_agent(text: str) -> bool:
    return Agent.objects.filter(name=text).exists()


def _live(agent: Agent) -> AgentVersion:
    if agent.live_version_id is None:
        raise Unknown(f"The agent “{agent}” has no version yet: save it once.")
    return AgentVersion.objects.select_related("agent").get(pk=agent.live_version_id)
