"""Starting runs: the rows and the plan of the model call, in one transaction, then the task.

Runs asked for while others are being created are created together (see dbthread.Batcher): a
hundred users pressing Send in the same second would otherwise queue a run's queries a hundred
times over on the one thread that database work shares. The database allows one active run per
session (a partial unique constraint), so two sends can never interleave, across any number of
processes.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from sessions_app import accounts
from sessions_app.engine import early, liveness
from sessions_app.engine.errors import InputError, RunConflict
from sessions_app.engine.generate import generate
from sessions_app.engine.plan import Plan
from sessions_app.engine.registry import RunHandle, registry
from sessions_app.events import open_stream
from sessions_app.llm import client as llm
from sessions_app.models import (
    ACTIVE_STATUSES,
    Agent,
    Message,
    Role,
    Run,
    RunStatus,
    Session,
    User,
)
from sessions_app.process import WORKER_ID
from sessions_app.services import examples, ratelimit, statesize, tools
from sessions_app.services.access import get_agent_for_user, get_sessions_for_owner
from sessions_app.services.context import Turn, build_messages_many
from sessions_app.services.sessions import default_session_name

Claim = accounts.TokenClaim | accounts.SignedIn


@dataclass
class Ask:
    user: User | Claim  # a claim until the batch checks it
    text: str
    agent_id: Any
    session_id: Any
    session_state: dict[str, Any] | None
    loop: asyncio.AbstractEventLoop  # where the model's request is sent early


def _starts(ask: Ask) -> tuple[str, ...]:
    """What an ask starts, as the rate limits count it: a run, and a session without one."""
    return (ratelimit.RUN,) if ask.session_id else (ratelimit.RUN, ratelimit.SESSION)


def validate_input(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InputError("The message is empty.")
    limit = settings.PARLEY_MAX_INPUT_CHARS
    if len(text) > limit:
        raise InputError(
            f"The message is too long ({len(text)} characters; the limit is {limit}).", 413
        )
    return text


async def start_run(
    user: User | Claim,
    input: str,
    *,
    agent_id: Any = None,
    session_id: Any = None,
    session_state: dict[str, Any] | None = None,
) -> RunHandle:
    """Create the run (and the session, when none is given) and start streaming its answer.
    `user` may be a claim not checked yet, checked first: a bearer token (refused, it raises
    accounts.Unauthorized) or a socket's sign-in (accounts.Inactive when the account is not active
    any more)."""
    text = validate_input(input)
    if session_state is not None and not isinstance(session_state, dict):
        raise InputError("session_state must be a JSON object.", 422)
    ask = Ask(user, text, agent_id, session_id, session_state, asyncio.get_running_loop())
    creator = registry.batcher(_create_runs, then=_launch, after=early.drop_unclaimed, tracked=True)
    return await creator.submit(ask)


def _launch(plan: Plan) -> RunHandle:
    """Start streaming a created run, in a task of the engine's own."""
    run = plan.run
    stream = open_stream(run.run_id, run.session_id)
    stream.publish(
        "RunStarted",
        model=run.model,
        model_provider=run.model_provider,
        input=run.input,
        position=run.position,
        created_at=run.created_at.isoformat(),
    )
    # A fresh context: the task must not inherit the request's (whose thread executor ends with
    # the response), since the run outlives whoever started it.
    task = asyncio.create_task(
        generate(plan, stream, early.claim(run.run_id)),
        name=f"run-{run.run_id}",
        context=contextvars.Context(),
    )
    handle = registry.active[run.run_id] = RunHandle(run.run_id, run.session_id, stream, task)
    registry.launching.discard(run.run_id)
    # Starting until its first piece (see generate), or its end if none comes.
    starts = registry.starts
    starts.add(run.run_id)
    task.add_done_callback(lambda _: starts.done(run.run_id))
    liveness.ensure_heartbeat()
    return handle


def _create_runs(asks: list[Ask]) -> list[Plan | Exception]:
    """Each ask's plan, or the exception that refused it. Claims are checked first, each kind
    in one query (their runs' first token would otherwise wait for a lookup of its own)."""
    outcomes: list[Plan | Exception | None] = [None] * len(asks)
    _check_claims(asks, outcomes)
    allowed = [i for i in range(len(asks)) if outcomes[i] is None]
    for i, outcome in zip(allowed, _create_allowed([asks[i] for i in allowed]), strict=True):
        outcomes[i] = outcome
    return outcomes  # type: ignore[return-value]


def _check_claims(asks: list[Ask], outcomes: list[Plan | Exception | None]) -> None:
    """Replace each claim by its user, as the database has it now, or refuse the ask."""
    claimed = [i for i, ask in enumerate(asks) if isinstance(ask.user, accounts.TokenClaim)]
    if claimed:
        raws = [asks[i].user.raw for i in claimed]  # type: ignore[union-attr]
        for i, user in zip(claimed, accounts.users_for_tokens(raws), strict=True):
            if isinstance(user, accounts.Unauthorized):
                outcomes[i] = user
            else:
                asks[i].user = user
    signed_in = [i for i, ask in enumerate(asks) if isinstance(ask.user, accounts.SignedIn)]
    if signed_in:
        found = accounts.active_users([asks[i].user.pk for i in signed_in])
        for i in signed_in:
            user = found.get(asks[i].user.pk)
            if user is None:
                outcomes[i] = accounts.Inactive()
            else:
                asks[i].user = user


def _create_allowed(asks: list[Ask]) -> list[Plan | Exception]:
    """All together, or, when that meets an active run (two sends into one session, or a run
    whose process died), one at a time."""
    if not asks:
        return []
    if len(asks) == 1:
        outcomes = [_create_alone(asks[0])]
    else:
        try:
            outcomes = _Creation(asks).run()
        except IntegrityError:
            outcomes = []
            for ask in asks:
                try:
                    outcomes.append(_create_alone(ask))
                except Exception as exc:
                    outcomes.append(exc)
                if isinstance(outcomes[-1], Plan):
                    # A later ask may meet this run: it is not stale, only not launched yet.
                    registry.launching.add(outcomes[-1].run.run_id)
    registry.launching.update(o.run.run_id for o in outcomes if isinstance(o, Plan))
    return outcomes


def _create_alone(ask: Ask) -> Plan | Exception:
    try:
        return _Creation([ask]).run()[0]
    except IntegrityError:
        pass
    # The session has an active run: maybe one whose process died. Reap and try once more.
    reaped = liveness.reap_stale_runs(session_id=ask.session_id) if ask.session_id else []
    if reaped:
        ask.loop.call_soon_threadsafe(liveness.announce, reaped)
        try:
            return _Creation([ask]).run()[0]
        except IntegrityError:
            pass
    return RunConflict("A run is already in progress in this session.")


class _Creation:
    """The runs of several asks (and the sessions of those without one), created with bulk
    queries in one transaction; IntegrityError, and nothing written, when any of them meets
    an active run."""

    def __init__(self, asks: list[Ask]) -> None:
        self.asks = asks
        self.outcomes: list[Plan | Exception | None] = [None] * len(asks)
        self.sessions: list[Session | None] = [None] * len(asks)
        self.agents: list[Agent | None] = [None] * len(asks)
        self._agent_cache: dict[Any, Agent | Exception] = {}
        self.now = timezone.now()

    def run(self) -> list[Plan | Exception]:
        with transaction.atomic():
            self._admit()
            live = [i for i in range(len(self.asks)) if self.outcomes[i] is None]
            fresh = self._sessions_of(live)
            runs, busy = self._runs_of(live)
            built, offered = self._calls_of(live, runs)
            # Everything the model is sent is known before anything is written: the requests
            # go out now, unless the transaction is bound to fail (a session with a run in
            # progress, or asked for twice at once: one of them answers RunConflict).
            targets = [self.sessions[i].pk for i in live]
            if live and not busy and len(set(targets)) == len(targets):
                requests = [
                    (run.run_id, run.model, sent, specs)
                    for run, sent, specs in zip(runs, built, offered, strict=True)
                ]
                early.send_from_thread(self.asks[live[0]].loop, requests)
            answers = self._write(live, fresh, runs)
        for n, (i, run) in enumerate(zip(live, runs, strict=True)):
            self.outcomes[i] = Plan(run, self.sessions[i], answers[n], built[n], offered[n])
        return self.outcomes  # type: ignore[return-value]

    def _admit(self) -> None:
        """Rate limits, then the access gates: each ask's session and agent, or its refusal."""
        by_user: dict[Any, list[int]] = {}
        for i, ask in enumerate(self.asks):
            by_user.setdefault(ask.user.pk, []).append(i)
        for indexes in by_user.values():
            user = self.asks[indexes[0]].user
            kinds = [_starts(self.asks[i]) for i in indexes]
            for i, refusal in zip(indexes, ratelimit.refusals(user, kinds), strict=True):
                self.outcomes[i] = refusal
            existing = [i for i in indexes if self.outcomes[i] is None and self.asks[i].session_id]
            found = get_sessions_for_owner(user, [self.asks[i].session_id for i in existing])
            for i, session in zip(existing, found, strict=True):
                if isinstance(session, Exception):
                    self.outcomes[i] = session
                else:
                    self.sessions[i] = session
        for i, ask in enumerate(self.asks):
            if self.outcomes[i] is not None:
                continue
            session = self.sessions[i]
            try:
                if session and not ask.agent_id:
                    self.agents[i] = session.agent
                else:
                    self.agents[i] = self._agent(ask, session.agent if session else None)
                if ask.session_state:
                    base = session.session_state if session else self.agents[i].session_state
                    statesize.check("session_state", {**base, **ask.session_state})
            except Exception as exc:
                self.outcomes[i] = exc

    def _agent(self, ask: Ask, loaded: Agent | None) -> Agent:
        key = str(ask.agent_id) if ask.agent_id else None
        if key not in self._agent_cache:
            try:
                self._agent_cache[key] = get_agent_for_user(ask.user, ask.agent_id, loaded=loaded)
            except Exception as exc:
                self._agent_cache[key] = exc
        found = self._agent_cache[key]
        if isinstance(found, Exception):
            raise found
        return found

    def _sessions_of(self, live: list[int]) -> list[Session]:
        """New sessions for asks without one, state merged into those with one."""
        fresh = []
        for i in live:
            ask, agent = self.asks[i], self.agents[i]
            if self.sessions[i] is None:
                self.sessions[i] = Session(
                    user=ask.user,
                    agent=agent,
                    session_name=default_session_name(ask.text),
                    session_state={**agent.session_state, **(ask.session_state or {})},
                )
                fresh.append(self.sessions[i])
            elif ask.session_state:
                state = {**self.sessions[i].session_state, **ask.session_state}
                self.sessions[i].session_state = state
        return fresh

    def _runs_of(self, live: list[int]) -> tuple[list[Run], set[Any]]:
        """The new runs, unsaved, and which of their sessions have a run in progress."""
        old = [self.sessions[i].pk for i in live if self.asks[i].session_id is not None]
        active = Count("pk", filter=Q(status__in=ACTIVE_STATUSES))
        state = list(
            Run.objects.filter(session__in=old)
            .values("session")
            .annotate(last=Max("position"), active=active)
        )
        last = {row["session"]: row["last"] for row in state}
        busy = {row["session"] for row in state if row["active"]}
        runs = [
            Run(
                session=self.sessions[i],
                user=self.asks[i].user,
                agent=self.agents[i],
                position=(last.get(self.sessions[i].pk) or 0) + 1,
                status=RunStatus.RUNNING,
                input=self.asks[i].text,
                model=self.agents[i].model or settings.LLM_MODEL,
                model_provider=llm.provider_name(),
                worker=WORKER_ID,
                heartbeat_at=self.now,
            )
            for i in live
        ]
        return runs, busy

    def _calls_of(self, live: list[int], runs: list[Run]) -> tuple[list[Any], list[Any]]:
        """What each run's model call is sent: messages (few-shot examples, history, the turn)
        and the tools offered."""
        found = examples.examples_for(self.agents[i] for i in live)
        turns = []
        for i, run in zip(live, runs, strict=True):
            agent, session = self.agents[i], self.sessions[i]
            given = found.get(agent.pk, examples.Examples())
            run.fewshot_items = given.item_ids
            turns.append(Turn(agent, session, run.position, run.input, run.user, given.messages))
        return build_messages_many(turns), [tools.tool_specs(self.agents[i]) for i in live]

    def _write(self, live: list[int], fresh: list[Session], runs: list[Run]) -> list[int]:
        """Insert the sessions, runs and each run's two messages; the answers' row ids."""
        Session.objects.bulk_create(fresh)
        Run.objects.bulk_create(runs)
        messages = []
        for run in runs:
            messages += [
                Message(run=run, session=run.session, order=0, role=Role.USER, content=run.input),
                Message(run=run, session=run.session, order=1, role=Role.ASSISTANT, content=""),
            ]
        Message.objects.bulk_create(messages)
        given = [i for i in live if self.asks[i].session_id]
        merged = [i for i in given if self.asks[i].session_state]
        for i in merged:
            self.sessions[i].save(update_fields=["session_state", "updated_at"])
        # Bumps updated_at so the sessions sort first.
        touched = [self.sessions[i].pk for i in given if i not in merged]
        if touched:
            Session.objects.filter(pk__in=touched).update(updated_at=self.now)
        return [message.pk for message in messages[1::2]]
