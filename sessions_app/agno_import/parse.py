"""One Agno session row (2.x or 1.x layout) read into plain values Parley can store.

Anything that makes a row unusable raises Skip with the reason the report gives. History copies
(`from_history`) and system prompts are left out of a run's messages: a run keeps its own turn.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sessions_app.ids import is_session_id
from sessions_app.models import RunStatus

TURN_ROLES = ("user", "assistant", "tool")
TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens")
# Agno 1.x counted cached prompt tokens as `cached_tokens`, 2.x as `cache_read_tokens`.
CACHE_FIELDS = ("cache_read_tokens", "cached_tokens")
STATUSES = {
    "COMPLETED": RunStatus.COMPLETED,
    "ERROR": RunStatus.ERROR,
    "CANCELLED": RunStatus.CANCELLED,
    "PAUSED": RunStatus.INTERRUPTED,
}


class Skip(Exception):
    """The row is not imported; `reason` says why, `kind` groups it in the report."""

    def __init__(self, reason: str, kind: str = "malformed") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass
class AgnoMessage:
    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str
    created_at: datetime | None
    metrics: dict[str, Any] | None  # an assistant message's model call


@dataclass
class AgnoRun:
    run_id: uuid.UUID
    status: str
    input: str
    content: str
    error: str
    model: str
    model_provider: str
    created_at: datetime
    finished_at: datetime | None
    metrics: dict[str, Any]
    session_state: dict[str, Any] | None
    messages: list[AgnoMessage]


@dataclass
class AgnoAgent:
    agent_id: str
    name: str
    model: str
    instructions: str


@dataclass
class AgnoSession:
    session_id: str
    user_id: str
    agent: AgnoAgent
    session_name: str
    session_state: dict[str, Any]
    metadata: dict[str, Any]
    summary: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    runs: list[AgnoRun] = field(default_factory=list)


def parse_row(row: dict[str, Any], layout: str) -> AgnoSession:
    session_id = row.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise Skip("no session_id")
    if not is_session_id(session_id):
        raise Skip("session_id is not letters, digits and ._:- (up to 128 characters)")
    kind = _kind(row)
    if kind != "agent":
        raise Skip(f"a {kind} session", kind)
    user_id = row.get("user_id")
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 150:
        raise Skip("no user_id (or longer than 150 characters)")
    session_data = _object(row, "session_data")
    if layout == "2.x":
        raw_runs, summary = _list(row, "runs"), _summary(_json(row, "summary"))
    else:
        memory = _object(row, "memory")
        raw_runs = memory.get("runs") or []
        if isinstance(raw_runs, dict):  # Memory v2 kept the runs of each session apart
            raw_runs = raw_runs.get(session_id) or []
        summary = _summary(memory.get("summary") or _memory_summary(memory, user_id, session_id))
    agent = _agent(row, raw_runs)
    runs = [_run(raw, session_id) for raw in _dicts(raw_runs, "runs")]
    created_at = _when(row.get("created_at")) or (runs[0].created_at if runs else None)
    if created_at is None:
        raise Skip("no created_at")
    state = session_data.get("session_state")
    metadata = _json(row, "metadata") if "metadata" in row else _json(row, "extra_data")
    if summary is not None:
        summary["upto"] = len(runs)
    return AgnoSession(
        session_id=session_id,
        user_id=user_id,
        agent=agent,
        session_name=str(session_data.get("session_name") or "")[:200],
        session_state=state if isinstance(state, dict) else {},
        metadata=metadata if isinstance(metadata, dict) else {},
        summary=summary,
        created_at=created_at,
        updated_at=_when(row.get("updated_at")) or created_at,
        runs=runs,
    )


def _memory_summary(memory: dict[str, Any], user_id: str, session_id: str) -> Any:
    # Agno 1.x's Memory kept summaries per user, then per session.
    summaries = memory.get("summaries")
    per_user = summaries.get(user_id) if isinstance(summaries, dict) else None
    return per_user.get(session_id) if isinstance(per_user, dict) else None


def _kind(row: dict[str, Any]) -> str:
    declared = str(row.get("session_type") or "agent").lower()
    if declared != "agent":
        return declared
    if row.get("team_id") and not row.get("agent_id"):
        return "team"
    if row.get("workflow_id") and not row.get("agent_id"):
        return "workflow"
    return "agent"


def _agent(row: dict[str, Any], raw_runs: list[Any]) -> AgnoAgent:
    data = _object(row, "agent_data")
    agent_id = row.get("agent_id") or data.get("agent_id") or data.get("id")
    if not isinstance(agent_id, str) or not agent_id:
        raise Skip("no agent_id")
    model = data.get("model")
    model_id = model.get("id") if isinstance(model, dict) else model
    if not model_id:
        model_id = next((r.get("model") for r in raw_runs if isinstance(r, dict)), "")
    instructions = data.get("instructions") or ""
    if isinstance(instructions, list):
        instructions = "\n".join(str(line) for line in instructions)
    return AgnoAgent(
        agent_id=agent_id,
        name=str(data.get("name") or agent_id)[:100],
        model=str(model_id or "")[:200],
        instructions=str(instructions),
    )


def _run(raw: dict[str, Any], session_id: str) -> AgnoRun:
    if "run_id" not in raw and isinstance(raw.get("response"), dict):
        raw = raw["response"]  # early 1.x AgentMemory: {message, messages, response}
    run_id = raw.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise Skip("a run without run_id")
    created_at = _when(raw.get("created_at"))
    if created_at is None:
        raise Skip(f"run {run_id} has no created_at")
    messages = [_message(m) for m in _dicts(raw.get("messages") or [], "messages")]
    own = [m for m in messages if m is not None]
    given = _text(_input(raw)) or next((m.content for m in own if m.role == "user"), "")
    if not own or own[0].role != "user":
        own.insert(0, AgnoMessage("user", given, None, "", created_at, None))
    metrics = _run_metrics(raw.get("metrics"))
    content = _text(raw.get("content"))
    status = _status(raw.get("status"), content)
    duration = metrics.get("duration")
    return AgnoRun(
        run_id=_run_uuid(run_id, session_id),
        status=status,
        input=given,
        content=content if status != RunStatus.ERROR else "",
        error=content if status == RunStatus.ERROR else "",
        model=str(raw.get("model") or "")[:200],
        model_provider=str(raw.get("model_provider") or "")[:50],
        created_at=created_at,
        finished_at=created_at + timedelta(seconds=duration) if duration else created_at,
        metrics=metrics,
        session_state=raw.get("session_state")
        if isinstance(raw.get("session_state"), dict)
        else None,
        messages=own,
    )


def _input(raw: dict[str, Any]) -> Any:
    given = raw.get("input")
    return given.get("input_content") if isinstance(given, dict) else given


def _message(raw: dict[str, Any]) -> AgnoMessage | None:
    role = raw.get("role")
    if raw.get("from_history") or role not in TURN_ROLES:
        return None
    calls = raw.get("tool_calls") if role == "assistant" else None
    metrics = raw.get("metrics") if role == "assistant" else None
    return AgnoMessage(
        role=role,
        content=_text(raw.get("content")),
        tool_calls=calls if isinstance(calls, list) and calls else None,
        tool_call_id=str(raw.get("tool_call_id") or "")[:100],
        created_at=_when(raw.get("created_at")),
        metrics=_run_metrics(metrics) if isinstance(metrics, dict) and metrics else None,
    )


def _status(value: Any, content: str) -> str:
    status = STATUSES.get(str(value or "").upper())
    if status is not None:
        return status
    # Agno 1.x stored finished runs as RUNNING; an unfinished one is never active here.
    return RunStatus.COMPLETED if content else RunStatus.INTERRUPTED


def _run_uuid(run_id: str, session_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(run_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"agno:run:{session_id}:{run_id}")


def _run_metrics(raw: Any) -> dict[str, Any]:
    """A run's metrics as Parley names them. Agno 1.x kept a list per field, one value per model
    call: tokens and times are summed, the first token is the first call's."""
    raw = raw if isinstance(raw, dict) else {}
    out: dict[str, Any] = {name: _count(raw.get(name)) for name in TOKEN_FIELDS}
    out["cache_read_tokens"] = next((_count(raw[f]) for f in CACHE_FIELDS if f in raw), 0)
    first = raw.get("time_to_first_token")
    out["time_to_first_token"] = _seconds(first[0] if isinstance(first, list) and first else first)
    out["duration"] = _seconds(raw.get("duration", raw.get("time")))
    return out


def _count(value: Any) -> int:
    if isinstance(value, list):
        return sum(_count(v) for v in value)
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def _seconds(value: Any) -> float | None:
    if isinstance(value, list):
        value = sum(v for v in value if isinstance(v, int | float)) if value else None
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def _summary(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str) and value.strip():
        return {"summary": value}
    if isinstance(value, dict) and value.get("summary"):
        return dict(value)
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [p.get("text") for p in value if isinstance(p.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return json.dumps(value, ensure_ascii=False)


def _when(value: Any) -> datetime | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        # Epoch seconds, as Agno stores them (milliseconds when that large).
        return datetime.fromtimestamp(value / 1000 if value > 10**11 else value, UTC)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _json(row: dict[str, Any], column: str) -> Any:
    """A JSON column's value; it may hold JSON text, or a JSON string holding JSON text."""
    value = row.get(column)
    for _ in range(2):
        if isinstance(value, bytes | bytearray | memoryview):
            value = bytes(value).decode()
        if not isinstance(value, str):
            return value
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise Skip(f"bad JSON in {column}") from exc
    return value


def _object(row: dict[str, Any], column: str) -> dict[str, Any]:
    value = _json(row, column)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Skip(f"{column} is not a JSON object")
    return value


def _list(row: dict[str, Any], column: str) -> list[Any]:
    value = _json(row, column)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Skip(f"{column} is not a JSON list")
    return value


def _dicts(values: Any, what: str) -> list[dict[str, Any]]:
    if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
        raise Skip(f"{what} is not a list of JSON objects")
    return values
