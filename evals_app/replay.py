"""What a trial sends the model: the item's conversation as its model saw it, asked again of a
candidate version.

The snapshot's leading system message is replaced by the one a run of the candidate would be
sent (its instructions, filled from its initial session state); the candidate's few-shot
examples follow, as a run of it would be given them, except the item under evaluation itself
(its answer would be in the question); then the item's history and its user turn. What came
after that turn (the answer, any tool rounds) is what the candidate is asked for. No tools are
offered: a trial answers, it acts on no session.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from datasets_app.models import DatasetItem
from datasets_app.services.snapshot import clean, up_to_last_question
from sessions_app.models import Agent, AgentVersion, Role, Session
from sessions_app.services import context
from sessions_app.services.examples import examples_for


class Unreplayable(ValueError):
    """The item cannot be asked again (deleted, or no user turn); the trial fails with this."""


@dataclass
class Candidate:
    """A version as its trials ask it, read once per run of an experiment."""

    version_id: Any
    agent: Agent  # unsaved, configured as the version
    model: str
    sampling: dict[str, Any]
    # The items its few-shot source gives, in the order sent, one more than it sends (a spare
    # for when the item under evaluation is among them), each with its turns.
    examples: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)

    @property
    def example_count(self) -> int:
        return self.agent.fewshot_count if self.agent.shows_examples else 0


@dataclass
class Request:
    model: str
    messages: list[dict[str, Any]]
    sampling: dict[str, Any]


def candidate(version: AgentVersion) -> Candidate:
    """Reads the database (its examples): call it from the database's side."""
    agent = version.as_agent()
    return Candidate(
        version_id=version.pk,
        agent=agent,
        model=agent.model or settings.LLM_MODEL,
        sampling=agent.sampling(),
        examples=_example_items(agent),
    )


def _example_items(agent: Agent) -> list[tuple[str, list[dict[str, Any]]]]:
    """The first count + 1 example items, each with its own turns. The source gives a run's
    examples as one list of turns; asking it for the first k items, k = 1, 2, …, tells which
    turns each item adds (few queries: a count is at most 20, and this is once per run)."""
    if not agent.shows_examples:
        return []
    found: list[tuple[str, list[dict[str, Any]]]] = []
    probe, sent = copy.copy(agent), 0
    for k in range(1, agent.fewshot_count + 2):
        probe.fewshot_count = k
        given = examples_for([probe]).get(agent.pk)
        if given is None or len(given.item_ids) < k:
            break  # the dataset has no more
        found.append((str(given.item_ids[-1]), given.messages[sent:]))
        sent = len(given.messages)
    return found


def request_for(candidate: Candidate, item: DatasetItem | None) -> Request:
    """What the trial of `item` by `candidate` sends; Unreplayable when it cannot be asked."""
    if item is None:
        raise Unreplayable("The item was deleted from its dataset.")
    asked = conversation_asked(item.messages)
    owner = item.owner.get_username() if item.owner_id and item.owner else ""
    system = context.system_message(candidate.agent, _session_of(candidate.agent, item), owner)
    messages = [system] if system is not None else []
    messages += examples_without(candidate, str(item.item_id))
    messages += asked
    return Request(candidate.model, messages, dict(candidate.sampling))


def conversation_asked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The snapshot up to and with its last user turn, leading system messages left out."""
    start = 0
    while start < len(messages) and messages[start].get("role") == Role.SYSTEM:
        start += 1
    asked = up_to_last_question(messages[start:])
    if not asked:
        raise Unreplayable("The item has no user turn to answer.")
    return [clean(m) for m in asked]


def examples_without(candidate: Candidate, item_id: str) -> list[dict[str, Any]]:
    """The candidate's example turns, the item under evaluation left out (the spare steps in)."""
    kept = [turns for shown, turns in candidate.examples if shown != item_id]
    return [dict(turn) for turns in kept[: candidate.example_count] for turn in turns]


def _session_of(agent: Agent, item: DatasetItem) -> Session:
    """The session a run of the candidate would be in: its initial state, no summary; named as
    the item's own conversation was, for instructions that quote {session_id}."""
    return Session(
        session_id=item.source_session_id or str(item.item_id),
        session_state=copy.deepcopy(agent.session_state or {}),
        summary=None,
    )
