"""An item's conversation, copied from a run or a session at the moment it is added.

Messages are OpenAI-shaped (role, content, tool_calls, tool_call_id); an assistant turn may also
carry the "rating" its run had, which exports read for weights and then leave out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sessions_app.models import Agent, CallKind, LLMCall, Message, Role, Run, RunStatus, Session
from sessions_app.services import context, tools

# Few-shot examples are sent with these names; they are never part of a snapshot.
EXAMPLE_NAMES = ("example_user", "example_assistant")
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id")


class NotCollectable(ValueError):
    """The run or session has nothing to learn from (not completed, no answer)."""


@dataclass
class Snapshot:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    rating: int | None = None


def effective_rating(run: Run) -> int | None:
    """Staff's judgement when given, else the user's."""
    return run.staff_rating if run.staff_rating is not None else run.feedback_rating


def of_run(run: Run) -> Snapshot:
    """The context the run was answered in (system, history), its turn and its answer."""
    return _answered(run, context_of=run)


def of_pair(chosen: Run, asked_first: Run) -> Snapshot:
    """A regeneration pair's chosen answer in the context the question was first asked in: a
    regenerated run also saw the earlier attempts in its history, which would give the rejected
    answer away."""
    return _answered(chosen, context_of=asked_first)


def _answered(run: Run, *, context_of: Run) -> Snapshot:
    _require_completed(run)
    own = _own_messages(run)
    messages = _context(context_of) + own
    return Snapshot(messages, _tools_used(messages), run.model, effective_rating(run))


def _context(run: Run) -> list[dict[str, Any]]:
    """What the run was sent before its own user message."""
    sent = _first_sent(run)
    if sent is None:
        return _rebuilt_context(run)
    before = [clean(m) for m in sent if m.get("name") not in EXAMPLE_NAMES]
    if before and before[-1]["role"] == Role.USER:
        before.pop()  # the run's own user message, also in its stored messages
    return before


def of_session(session: Session) -> Snapshot:
    """Every completed run of the session in order, after the system message of the last."""
    runs = list(session.runs.filter(status=RunStatus.COMPLETED).order_by("position"))
    if not runs:
        raise NotCollectable("This session has no completed run to learn from.")
    sent = _first_sent(runs[-1])
    system = [clean(sent[0])] if sent and sent[0].get("role") == Role.SYSTEM else []
    if sent is None:
        built = context.system_message(runs[-1].agent, session, session.user.get_username())
        system = [built] if built else []
    rows = Message.objects.filter(run__in=runs).exclude(role=Role.SYSTEM)
    kept = context.drop_dangling_tool_calls(list(rows.order_by("run__position", "order")))
    ratings = {r.pk: effective_rating(r) for r in runs}
    messages = system + [_with_rating(context.as_openai(m), ratings[m.run_id]) for m in kept]
    last = runs[-1]
    return Snapshot(messages, _tools_used(messages), last.model, effective_rating(last))


def _require_completed(run: Run) -> None:
    if run.status != RunStatus.COMPLETED:
        raise NotCollectable(f"Only completed runs can be added; this run is {run.status}.")


def _own_messages(run: Run) -> list[dict[str, Any]]:
    rating = effective_rating(run)
    rows = run.messages.exclude(role=Role.SYSTEM).order_by("order")
    out = [_with_rating(context.as_openai(m), rating) for m in rows]
    if not out or out[-1]["role"] != Role.ASSISTANT or not (out[-1]["content"] or "").strip():
        raise NotCollectable("This run has no final answer to learn from.")
    return out


def _with_rating(message: dict[str, Any], rating: int | None) -> dict[str, Any]:
    if message["role"] == Role.ASSISTANT and rating is not None:
        message["rating"] = rating
    return message


def _first_sent(run: Run) -> list[dict[str, Any]] | None:
    call = (
        LLMCall.objects.filter(run=run, kind=CallKind.CHAT, sent_messages__isnull=False)
        .order_by("created_at", "pk")
        .only("sent_messages")
        .first()
    )
    return call.sent_messages if call is not None else None


def _rebuilt_context(run: Run) -> list[dict[str, Any]]:
    """For runs recorded before calls kept what they sent: the system message and history
    rebuilt from the session as it is now."""
    session = run.session
    system = context.system_message(run.agent, session, session.user.get_username())
    history = context.history_messages(run.agent, session, run.position)
    return ([system] if system else []) + [context.as_openai(m) for m in history]


def clean(message: dict[str, Any]) -> dict[str, Any]:
    return {key: message[key] for key in MESSAGE_KEYS if message.get(key) not in (None, "")} | {
        "content": message.get("content") or ""
    }


def _tools_used(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    used = {
        call["function"]["name"]
        for m in messages
        for call in m.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    }
    if not used:
        return []
    # Every tool Parley can offer, whatever the agent offers today.
    every = tools.tool_specs(
        Agent(
            search_session_history=True,
            add_past_sessions_to_context=False,
            enable_agentic_state=True,
        )
    )
    known = {spec["function"]["name"]: spec for spec in every}
    return [known.get(name) or _bare_spec(name) for name in sorted(used)]


def _bare_spec(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def conversation(messages: list[dict[str, Any]], corrected: str = "") -> list[dict[str, Any]]:
    """The messages as exported: metadata left out, the final answer corrected when it was."""
    out = [clean(m) for m in messages]
    if corrected and out and out[-1]["role"] == Role.ASSISTANT:
        out[-1] = {"role": Role.ASSISTANT, "content": corrected}
    return out


def content_hash(messages: list[dict[str, Any]], corrected: str = "", other: str = "") -> str:
    body = json.dumps([conversation(messages, corrected), other], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def up_to_last_question(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as its last user turn asked it: what came after (the answer, and any
    tool rounds before it) left out. Empty when no user turn is there."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == Role.USER), default=-1)
    return messages[: last + 1]
