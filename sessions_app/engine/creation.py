"""Creating runs together: one transaction for the runs (and new sessions) of many asks, with
bulk queries, and the plan of each run's model call, its request sent ahead (see early).

A run's rate limit, access gates, admission checks (budgets), agent, session state, history and
few-shot examples are all read here, for the whole batch at once (see start for the batching and
its fallbacks).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from sessions_app import dbclock
from sessions_app.engine import early
from sessions_app.engine.live import Ask, LiveRun
from sessions_app.engine.plan import Plan
from sessions_app.engine.registry import registry
from sessions_app.llm import client as llm
from sessions_app.models import (
    ACTIVE_STATUSES,
    Agent,
    Message,
    Role,
    Run,
    RunStatus,
    Session,
)
from sessions_app.process import WORKER_ID
from sessions_app.services import admission, examples, ratelimit, statesize, tools
from sessions_app.services.access import agent_scope, get_agent_for_user, get_sessions_for_owner
from sessions_app.services.context import Turn, build_messages_many
from sessions_app.services.sessions import default_session_name


def counted_starts(ask: Ask) -> tuple[str, ...]:
    """What an ask starts, as the rate limits count it: a run, and a session without one."""
    return (ratelimit.RUN,) if ask.session_id else (ratelimit.RUN, ratelimit.SESSION)


def sampling_for(live: LiveRun) -> dict[str, Any]:
    """The agent version's sampling settings, under those the ask sets; but an ask may not
    raise the version's max_tokens, the operator's bound on what an answer costs."""
    assert live.agent is not None
    own, asked = live.agent.sampling(), live.ask.options.sampling
    merged = {**own, **asked}
    if "max_tokens" in own and "max_tokens" in asked:
        merged["max_tokens"] = min(own["max_tokens"], asked["max_tokens"])
    return merged


class Creation:
    """The runs of several asks (and the sessions of those without one), created with bulk
    queries in one transaction; IntegrityError, and nothing written, when any of them meets
    an active run. Each run's session, agent, plan or refusal is set on it."""

    def __init__(self, runs: list[LiveRun]) -> None:
        self.runs = runs
        for live in runs:  # what an earlier try found was rolled back with it
            live.refusal = live.session = live.agent = live.plan = None
        self._agent_cache: dict[tuple[Any, ...], Agent | Exception] = {}
        self.now = timezone.now()

    def run(self) -> None:
        with transaction.atomic():
            self._admit()
            admitted = [live for live in self.runs if live.refusal is None]
            fresh = self._sessions_of(admitted)
            runs, busy = self._runs_of(admitted)
            plans = self._plans_of(admitted, runs)
            # Everything the model is sent is known before anything is written: the requests
            # go out now, unless the transaction is bound to fail (a session with a run in
            # progress, or asked for twice at once: one of them answers RunConflict).
            targets = [live.session.pk for live in admitted]
            if admitted and not busy and len(set(targets)) == len(targets):
                requests = [
                    (live, plan.run.model, plan.messages, plan.tools, plan.first_sampling())
                    for live, plan in zip(admitted, plans, strict=True)
                ]
                early.send_from_thread(registry.loop, requests)
            answers = self._write(admitted, fresh, runs)
        for live, plan, answer in zip(admitted, plans, answers, strict=True):
            plan.assistant_message_id = answer
            live.plan = plan

    def _admit(self) -> None:
        """Rate limits, the access gates (each ask's session and agent), then the admission
        checks (budgets): each ask's refusal, if any."""
        by_user: dict[Any, list[LiveRun]] = {}
        for live in self.runs:
            by_user.setdefault(live.ask.user.pk, []).append(live)
        for runs in by_user.values():
            user = runs[0].ask.user
            kinds = [counted_starts(live.ask) for live in runs]
            for live, refusal in zip(runs, ratelimit.refusals(user, kinds), strict=True):
                live.refusal = refusal
            for live in runs:
                if live.refusal is None and live.placed and live.placed.session:
                    live.session = live.placed.session
            existing = [
                live
                for live in runs
                if live.refusal is None and live.ask.session_id and live.session is None
            ]
            found = get_sessions_for_owner(user, [live.ask.session_id for live in existing])
            for live, session in zip(existing, found, strict=True):
                if isinstance(session, Exception):
                    live.refusal = session
                else:
                    live.session = session
        for live in self.runs:
            if live.refusal is None:
                try:
                    self._agent_and_state(live)
                except Exception as exc:
                    live.refusal = exc
        admitted = [live for live in self.runs if live.refusal is None]
        asks = [(live.ask.user, live.agent.pk) for live in admitted]
        for live, refusal in zip(admitted, admission.refusals(asks), strict=True):
            live.refusal = refusal

    def _agent_and_state(self, live: LiveRun) -> None:
        """The run's agent (its session's, unless the ask names one); the state it would have."""
        ask, session = live.ask, live.session
        if session and not ask.agent_id:
            live.agent = session.agent
        else:
            live.agent = self._agent(ask, session.agent if session else None)
        if ask.session_state:
            base = session.session_state if session else live.agent.session_state
            statesize.check("session_state", {**base, **ask.session_state})

    def _agent(self, ask: Ask, loaded: Agent | None) -> Agent:
        # Which agent an id (or none: the default) gives, and whether it may be used, depends
        # on who asks and through which token: the batch mixes users.
        user = ask.user
        key = (user.pk, agent_scope(user), str(ask.agent_id) if ask.agent_id else None)
        if key not in self._agent_cache:
            try:
                self._agent_cache[key] = get_agent_for_user(ask.user, ask.agent_id, loaded=loaded)
            except Exception as exc:
                self._agent_cache[key] = exc
        found = self._agent_cache[key]
        if isinstance(found, Exception):
            raise found
        return found

    def _sessions_of(self, admitted: list[LiveRun]) -> list[Session]:
        """New sessions for asks without one, state merged into those with one."""
        fresh = []
        for live in admitted:
            ask, agent = live.ask, live.agent
            if live.session is None:
                live.session = Session(
                    user=ask.user,
                    agent=agent,
                    session_name=default_session_name(ask.text),
                    session_state={**agent.session_state, **(ask.session_state or {})},
                    metadata=live.placed.metadata if live.placed else {},
                )
                if live.placed and live.placed.new_id:
                    live.session.session_id = live.placed.new_id
                fresh.append(live.session)
            elif ask.session_state:
                live.session.session_state = {**live.session.session_state, **ask.session_state}
        return fresh

    def _runs_of(self, admitted: list[LiveRun]) -> tuple[list[Run], set[Any]]:
        """The new runs, unsaved, and which of their sessions have a run in progress."""
        old = [live.session.pk for live in admitted if live.ask.session_id is not None]
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
                session=live.session,
                user=live.ask.user,
                agent=live.agent,
                agent_version_id=live.agent.live_version_id,
                position=(last.get(live.session.pk) or 0) + 1,
                status=RunStatus.RUNNING,
                input=live.ask.text,
                source=live.ask.options.source,
                model=live.agent.model or settings.LLM_MODEL,
                model_provider=llm.provider_name(),
                worker=WORKER_ID,
                heartbeat_at=dbclock.now(),
            )
            for live in admitted
        ]
        return runs, busy

    def _plans_of(self, admitted: list[LiveRun], runs: list[Run]) -> list[Plan]:
        """What each run's model call is sent: messages (few-shot examples, history, the turn),
        the tools offered (the agent's, and its client's) and the sampling settings. Their
        answer rows are not written yet."""
        found = examples.examples_for(live.agent for live in admitted)
        turns = []
        for live, run in zip(admitted, runs, strict=True):
            agent, session = live.agent, live.session
            given = found.get(agent.pk, examples.Examples())
            run.fewshot_items = given.item_ids
            system = live.ask.options.system
            turns.append(
                Turn(agent, session, run.position, run.input, run.user, given.messages, system)
            )
        return [
            Plan(
                run,
                live.session,
                0,
                messages,
                tools.tool_specs(live.agent) + live.ask.options.tools,
                sampling_for(live),
                client_tools=live.ask.options.client_tools,
                tool_choice=live.ask.options.tool_choice,
            )
            for live, run, messages in zip(admitted, runs, build_messages_many(turns), strict=True)
        ]

    def _write(self, admitted: list[LiveRun], fresh: list[Session], runs: list[Run]) -> list[int]:
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
        given = [live for live in admitted if live.ask.session_id]
        merged = [live for live in given if live.ask.session_state]
        for live in merged:
            live.session.save(update_fields=["session_state", "updated_at"])
        # Bumps updated_at so the sessions sort first.
        touched = [live.session.pk for live in given if not live.ask.session_state]
        if touched:
            Session.objects.filter(pk__in=touched).update(updated_at=self.now)
        return [message.pk for message in messages[1::2]]
