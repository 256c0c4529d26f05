"""Work done after an answer, off its path: session summaries and titles.

Both start once the run is complete and its final event is out, so the user never waits for
them; both record their own model call (`summary`, `title`); a failure of either is logged and
changes nothing else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sessions_app.events import publish_session
from sessions_app.llm import client as llm
from sessions_app.llm.errors import LLMError
from sessions_app.llm.usage import Usage
from sessions_app.models import CallKind, NameSource, Run, RunStatus, Session
from sessions_app.services.titles import EMBEDDED_SAMPLING, PROMPTS, clean_title, title_request
from sessions_app.usage import accounting

log = logging.getLogger("parley.memory")

SUMMARY_INPUT_CHARS = 12_000
# The embedded model answers one request at a time: a summary of at most 120 words holds it no
# longer than that takes (a configured endpoint gets no such setting, as for titles).
SUMMARY_EMBEDDED = {"max_tokens": 320}

SUMMARY_PROMPT = (
    "You maintain a running summary of a conversation between a user and an assistant. "
    "Update the previous summary with the new exchanges. Keep facts about the user, their "
    "goals and decisions; drop small talk. Answer with JSON only: "
    '{"summary": "<at most 120 words>", "topics": ["<short topic>", ...]}'
)


class BackgroundJobs:
    """This process's title and summary jobs: started after a run, awaited by no one but
    `drain`. A session has one summary pass at a time; a run completed meanwhile makes it go
    again rather than start a second."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._summarizing: dict[uuid.UUID, bool] = {}  # session -> another pass was asked for

    def start(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def summarize(self, session_id: str) -> None:
        """Bring the session's summary up to date with its runs, now or after the pass running."""
        if session_id in self._summarizing:
            self._summarizing[session_id] = True  # the running pass will go again
        else:
            self._summarizing[session_id] = False
            self.start(self._summaries(session_id), f"summary-{session_id}")

    async def drain(self) -> None:
        """Let every job finish, those started meanwhile too (tests use it)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _summaries(self, session_id: str) -> None:
        try:
            while True:
                await update_summary(session_id)
                if not self._summarizing.get(session_id):
                    break
                self._summarizing[session_id] = False
        finally:
            self._summarizing.pop(session_id, None)


jobs = BackgroundJobs()


def after_run(run: Run) -> None:
    """Start the background work a finished run calls for."""
    if run.status != RunStatus.COMPLETED:
        return
    if run.position == 1 and settings.PARLEY_GENERATE_TITLES:
        jobs.start(generate_title(run.session_id), f"title-{run.session_id}")
    if run.agent.enable_session_summaries:
        jobs.summarize(run.session_id)


async def _record(
    session: Session,
    kind: str,
    model: str,
    usage: Usage,
    started: float,
    ok: bool,
    error: str = "",
    *,
    sent: list[dict[str, Any]],
) -> None:
    await accounting.call_row(
        usage=usage,
        model=model,
        duration=time.perf_counter() - started,
        ok=ok,
        error=error,
        kind=kind,
        sent_messages=sent,
        session_id=session.session_id,
        user_id=session.user_id,
        agent_id=session.agent_id,
    ).asave()


async def update_summary(session_id: str) -> dict[str, Any] | None:
    """Fold the runs since the last summary into it: {summary, topics, updated_at, upto}."""
    session = await Session.objects.select_related("agent").aget(pk=session_id)
    previous = session.summary if isinstance(session.summary, dict) else {}
    upto = int(previous.get("upto") or 0)
    new_runs = [
        run
        async for run in Run.objects.filter(
            session=session, status=RunStatus.COMPLETED, position__gt=upto
        ).order_by("position")
    ]
    if not new_runs:
        return previous or None
    exchanges = "\n\n".join(f"User: {r.input}\nAssistant: {r.content}" for r in new_runs)
    prompt = (
        f"Previous summary:\n{previous.get('summary') or '(none yet)'}\n\n"
        f"New exchanges:\n{exchanges[-SUMMARY_INPUT_CHARS:]}"
    )
    model = session.agent.model or settings.LLM_MODEL
    started = time.perf_counter()
    messages = [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": prompt}]
    try:
        text, usage = await llm.complete(model, messages, embedded=SUMMARY_EMBEDDED)
    except LLMError as exc:
        log.warning("summary of session %s failed: %s", session_id, exc.message)
        await _record(
            session,
            CallKind.SUMMARY,
            model,
            Usage(estimated=True),
            started,
            ok=False,
            error=exc.message,
            sent=messages,
        )
        return None
    summary, topics = _parse_summary(text)
    if not summary:
        await _record(
            session,
            CallKind.SUMMARY,
            model,
            usage,
            started,
            ok=False,
            error="The model returned an empty summary.",
            sent=messages,
        )
        return None
    value = {
        "summary": summary,
        "topics": topics,
        "updated_at": timezone.now().isoformat(),
        "upto": new_runs[-1].position,
    }
    await Session.objects.filter(pk=session_id).aupdate(summary=value)
    await _record(session, CallKind.SUMMARY, model, usage, started, ok=True, sent=messages)
    return value


def _parse_summary(text: str) -> tuple[str, list[str]]:
    """The model's JSON; a model that ignores the format still gives a usable summary."""
    match = re.search(r"\{.*\}", text, re.S)
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("summary"), str):
            topics = [str(t)[:60] for t in data.get("topics") or [] if str(t).strip()][:10]
            return data["summary"].strip(), topics
    return text.strip()[:2000], []


async def generate_title(session_id: str) -> str | None:
    """Ask the model for a short title; the first message stays when it can't give one."""
    session = await Session.objects.select_related("agent").aget(pk=session_id)
    if session.name_source == NameSource.USER:
        return None
    first = await Run.objects.filter(session=session).order_by("position").afirst()
    if first is None:
        return None
    model = session.agent.model or settings.LLM_MODEL
    for attempt in range(len(PROMPTS)):
        messages = title_request(first.input, attempt)
        started = time.perf_counter()
        try:
            text, usage = await llm.complete(model, messages, embedded=EMBEDDED_SAMPLING)
        except LLMError as exc:
            await _record(
                session,
                CallKind.TITLE,
                model,
                Usage(estimated=True),
                started,
                ok=False,
                error=exc.message,
                sent=messages,
            )
            continue
        title = clean_title(text, first.input)
        await _record(
            session,
            CallKind.TITLE,
            model,
            usage,
            started,
            ok=bool(title),
            error="" if title else "The model returned no usable title.",
            sent=messages,
        )
        if title:
            # Conditional: a rename made meanwhile wins.
            updated = await Session.objects.filter(
                ~Q(name_source=NameSource.USER), pk=session_id
            ).aupdate(session_name=title, name_source=NameSource.MODEL)
            if updated:
                publish_session(session_id, "SessionRenamed", title=title)
                return title
            return None
    return None
