"""Which session a `/v1` conversation is: the one the caller names, the one its earlier turns
continue, or a new one.

OpenAI's protocol is stateless: each request carries the whole conversation. A Parley session
keeps it, so a request is matched to a session. Named (`X-Parley-Session-Id`,
`metadata.session_id`, or a client's own conversation header): that session, created on first
use with that id. Not named: when the caller's earlier turns are exactly the completed runs of a
session of theirs with that agent (its inputs and answers, in order), the new turn continues it;
otherwise a new session is started whose history is the caller's turns, its metadata naming the
session it forked from (of those that began with the same question, the one sharing the most
leading turns), if any. Sync: from the database's side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db import transaction
from django.utils import timezone

from openai_app.errors import OpenAIError
from sessions_app.ids import is_session_id
from sessions_app.models import Agent, Message, Role, Run, RunSource, RunStatus, Session, User
from sessions_app.services import sessions as session_service
from sessions_app.services.sessions import SessionIdTaken

Pair = tuple[str, str]  # a user turn and the answer the caller has for it


@dataclass
class Conversation:
    """A request's messages as turns: its system text, its earlier turns, its new question."""

    system: str
    earlier: list[Pair]
    question: str
    first_question: str = field(init=False)

    def __post_init__(self) -> None:
        self.first_question = self.earlier[0][0] if self.earlier else self.question


def turns_of(messages: list[dict[str, Any]]) -> Conversation:
    """System and developer texts joined; user turns each with the assistant texts that follow
    it, joined (a run's answer is the text of all its rounds: the client has it in one message,
    or, where the client ran tools, one a round); the last message must be the user's."""
    system = "\n\n".join(
        m["content"] for m in messages if m["role"] in ("system", "developer") and m["content"]
    )
    talk = [m for m in messages if m["role"] in ("user", "assistant")]
    if messages[-1]["role"] != "user":
        raise OpenAIError(
            400,
            "The last message must be the user's (a turn to answer) or tool results.",
            param="messages",
        )
    pairs: list[Pair] = []
    asked: str | None = None
    answer = ""  # the assistant texts after `asked`
    for message in talk[:-1]:
        if message["role"] == "user":
            if asked is not None:  # a user turn without an answer keeps an empty one
                pairs.append((asked, answer))
            asked, answer = message["content"], ""
        else:
            answer += message["content"]
    if asked is not None:
        pairs.append((asked, answer))
    return Conversation(system, pairs, talk[-1]["content"])


def tool_results(messages: list[dict[str, Any]]) -> dict[str, str]:
    """What a request answering tool calls ends with: its tool messages, by the call each
    answers."""
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        trailing.append(message)
    return {m["tool_call_id"]: m["content"] for m in reversed(trailing)}


def session_for(
    user: User, agent: Agent, conversation: Conversation, metadata: dict[str, Any]
) -> Found:
    """The session a turn with earlier turns that names none goes into: the one those turns
    are, or a new one (created here)."""
    candidates = _sessions_sharing(user, agent, conversation.earlier)
    for candidate in candidates:
        if candidate.is_all:
            return Found(candidate.session_id, created=False)
    forked_from = candidates[0].session_id if candidates else None
    return _new(user, agent, conversation, forked_from, metadata)


def named_anew(
    user: User, agent: Agent, conversation: Conversation, named: str, metadata: dict[str, Any]
) -> Found:
    """A session made with the id the caller named (someone else's id: SessionIdTaken)."""
    return _new(user, agent, conversation, None, metadata, session_id=named)


@dataclass(frozen=True)
class Found:
    session_id: str
    created: bool  # by this request


def check_session_id(named: str) -> None:
    """OpenAIError 400 for a named id that cannot be a session's."""
    if not is_session_id(named):
        raise OpenAIError(
            400,
            "A session id is letters, digits and . _ : - (up to 128 characters).",
            param="session_id",
        )


def refuse_taken(named: str) -> None:
    """SessionIdTaken when a session of that id exists (someone else's: not `existing`)."""
    if Session.objects.filter(pk=named).exists():
        raise SessionIdTaken("A session with this id exists already.")


class Sharing(NamedTuple):
    session_id: str
    shared: int  # leading turns, question and answer, the same as the caller's
    is_all: bool  # the session's completed runs are the caller's turns and no more


def _sessions_sharing(user: User, agent: Agent, earlier: list[Pair]) -> list[Sharing]:
    """The user's sessions with the agent that began with the caller's first question, each with
    how many leading turns it shares, the most first (newest among equals). A session's runs are
    read once: one more than the caller's turns tells whether it goes on past them."""
    first_input = earlier[0][0]
    starts = (
        Run.objects.filter(
            session__user=user, session__agent=agent, status=RunStatus.COMPLETED, input=first_input
        )
        .order_by("-session__updated_at")
        .values_list("session_id", flat=True)[:20]
    )
    found = []
    for session_id in dict.fromkeys(starts):
        stored = _pairs_of(session_id, len(earlier) + 1)
        if not stored or _plain(stored[0][0]) != _plain(first_input):
            continue  # the question came later in that session
        shared = 0
        for mine, theirs in zip(stored, earlier, strict=False):
            if not _same(mine, theirs):
                break
            shared += 1
        whole = shared == len(earlier) == len(stored)
        found.append(Sharing(session_id, shared, whole))
    found.sort(key=lambda row: -row.shared)
    return found


def _pairs_of(session_id: str, most: int) -> list[Pair]:
    rows = (
        Run.objects.filter(session_id=session_id, status=RunStatus.COMPLETED)
        .order_by("position")
        .values_list("input", "content")[:most]
    )
    return list(rows)


def _same(stored: Pair, given: Pair) -> bool:
    """Clients trim answers (each part of one, where they ran tools) and normalise line ends:
    compared without their whitespace."""
    return all(_plain(a) == _plain(b) for a, b in zip(stored, given, strict=True))


def _plain(text: str) -> str:
    return "".join(text.split())


def _new(
    user: User,
    agent: Agent,
    conversation: Conversation,
    forked_from: str | None,
    metadata: dict[str, Any],
    session_id: str | None = None,
) -> Found:
    """A new session with the caller's earlier turns as its history."""
    extra = {"forked_from": forked_from} if forked_from else {}
    with transaction.atomic():
        session = session_service.create_session(
            user,
            agent_id=agent.pk,
            metadata={**metadata, **extra},
            session_id=session_id,
        )
        session.session_name = session_service.default_session_name(conversation.first_question)
        session.save(update_fields=["session_name"])
        _write_history(session, agent, conversation.earlier)
    return Found(session.session_id, created=True)


def _write_history(session: Session, agent: Agent, earlier: list[Pair]) -> None:
    """The caller's turns as completed runs (no model was asked: no calls, no metrics)."""
    now = timezone.now()  # the session is new: its runs start at 1
    runs = [
        Run(
            session=session,
            user=session.user,
            agent=agent,
            agent_version_id=agent.live_version_id,
            position=n,
            status=RunStatus.COMPLETED,
            input=question,
            content=answer,
            source=RunSource.HISTORY,
            finished_at=now,
        )
        for n, (question, answer) in enumerate(earlier, 1)
    ]
    Run.objects.bulk_create(runs)
    messages = []
    for run in runs:
        turns = [(Role.USER, run.input)] + ([(Role.ASSISTANT, run.content)] if run.content else [])
        messages += [
            Message(run=run, session=session, order=order, role=role, content=text)
            for order, (role, text) in enumerate(turns)
        ]
    Message.objects.bulk_create(messages)
