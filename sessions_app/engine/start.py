"""Starting runs: the rows and the plan of the model call, in one transaction, then the task.

Runs asked for while others are being created are created together (see dbthread.Batcher): a
hundred users pressing Send in the same second would otherwise queue a run's queries a hundred
times over on the one thread that database work shares. The database allows one active run per
session (a partial unique constraint), so two sends can never interleave, across any number of
processes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError

from sessions_app import accounts
from sessions_app.engine import early, liveness
from sessions_app.engine.creation import Creation
from sessions_app.engine.errors import InputError, RunConflict
from sessions_app.engine.generate import generate
from sessions_app.engine.live import Ask, LiveRun, RunOptions
from sessions_app.engine.registry import registry
from sessions_app.events import open_stream
from sessions_app.models import (
    ACTIVE_STATUSES,
    RunSource,
    Session,
    User,
)
from sessions_app.services.access import get_sessions_for_owner

Claim = accounts.TokenClaim | accounts.SignedIn
REST_API = RunOptions(source=RunSource.API)  # the options of a run asked for by its input alone


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
    options: RunOptions = REST_API,
) -> LiveRun:
    """Create the run (and the session, when none is given) and start streaming its answer.
    `user` may be a claim not checked yet, checked first: a bearer token (refused, it raises
    accounts.Unauthorized) or a socket's sign-in (accounts.Inactive when the account is not active
    any more). NotServing while the server stops."""
    text = validate_input(input)
    if session_state is not None and not isinstance(session_state, dict):
        raise InputError("session_state must be a JSON object.", 422)
    registry.check_serving()
    live = LiveRun(Ask(user, text, agent_id, session_id, session_state, options))
    creator = registry.batcher(_create_runs, then=launch, after=early.drop_unclaimed, tracked=True)
    return await creator.submit(live)


def launch(live: LiveRun) -> LiveRun:
    """Start streaming a created run (or a paused one going on), in a task of the engine's own."""
    run, before = live.plan.run, live.plan.before
    if before is not None:
        live.stream = open_stream(run.run_id, run.session_id, seq_from=before.seq, said=before.said)
        live.stream.publish("RunContinued", content=before.said, position=run.position)
    else:
        live.stream = open_stream(run.run_id, run.session_id)
        live.stream.publish(
            "RunStarted",
            model=run.model,
            model_provider=run.model_provider,
            input=run.input,
            position=run.position,
            created_at=run.created_at.isoformat(),
        )
    registry.launch(live, generate(live, early.claim(live)))
    liveness.ensure_heartbeat()
    return live


def _create_runs(runs: list[LiveRun]) -> list[LiveRun | Exception]:
    """Each run, created, or the exception that refused it. Claims are checked first, each kind
    in one query (their runs' first token would otherwise wait for a lookup of its own)."""
    _check_claims(runs)
    _place([live for live in runs if live.refusal is None and live.ask.options.place])
    try:
        _create_allowed([live for live in runs if live.refusal is None])
    finally:
        _unplace([live for live in runs if live.placed and live.plan is None])
    return [live.refusal or live for live in runs]


def _place(runs: list[LiveRun]) -> None:
    """Runs whose door places them: their agent and session, or why not."""
    named = _named_sessions(runs)
    for live in runs:
        place = live.ask.options.place
        assert place is not None and isinstance(live.ask.user, User)
        try:
            live.placed = place(live.ask.user, named.get(live))
        except Exception as exc:
            live.refusal = exc
        else:
            live.ask.agent_id, live.ask.session_id = live.placed.agent_id, live.placed.session_id


def _named_sessions(runs: list[LiveRun]) -> dict[LiveRun, Session]:
    """The sessions the asks name that are their askers' own, each asker's in one query (a
    hundred clients each naming their session would otherwise queue a query each)."""
    by_user: dict[Any, list[LiveRun]] = {}
    for live in runs:
        if live.ask.options.named_session is not None:
            by_user.setdefault(live.ask.user.pk, []).append(live)
    found: dict[LiveRun, Session] = {}
    for asks in by_user.values():
        ids = [live.ask.options.named_session for live in asks]
        for live, session in zip(asks, get_sessions_for_owner(asks[0].ask.user, ids), strict=True):
            if isinstance(session, Session):
                found[live] = session
    return found


def _unplace(uncreated: list[LiveRun]) -> None:
    """Sessions made for runs that were then not created go again, with the history their
    placement copied into them: no chat is left without its question."""
    made = [live.placed.session_id for live in uncreated if live.placed and live.placed.created]
    if made:
        Session.objects.filter(pk__in=made).exclude(runs__status__in=ACTIVE_STATUSES).delete()


def _check_claims(runs: list[LiveRun]) -> None:
    """Replace each claim by its user, as the database has it now, or refuse the ask."""
    claimed = [live for live in runs if isinstance(live.ask.user, accounts.TokenClaim)]
    if claimed:
        raws = [live.ask.user.raw for live in claimed]  # type: ignore[union-attr]
        for live, user in zip(claimed, accounts.users_for_tokens(raws), strict=True):
            if isinstance(user, accounts.Unauthorized):
                live.refusal = user
            else:
                live.ask.user = user
    signed_in = [live for live in runs if isinstance(live.ask.user, accounts.SignedIn)]
    if signed_in:
        found = accounts.active_users([live.ask.user.pk for live in signed_in])
        for live in signed_in:
            user = found.get(live.ask.user.pk)
            if user is None:
                live.refusal = accounts.Inactive()
            else:
                live.ask.user = user


def _create_allowed(runs: list[LiveRun]) -> None:
    """All together, or, when that meets an active run (two sends into one session, or a run
    whose process died), one at a time."""
    if len(runs) == 1:
        _create_alone(runs[0])
    elif runs:
        try:
            Creation(runs).run()
        except IntegrityError:
            for live in runs:
                try:
                    _create_alone(live)
                except Exception as exc:
                    live.refusal = exc
                if live.plan is not None:
                    # A later ask may meet this run: it is not stale, only not launched yet.
                    registry.created(live)
    for live in runs:
        if live.plan is not None:
            registry.created(live)


def _create_alone(live: LiveRun) -> None:
    try:
        return Creation([live]).run()
    except IntegrityError:
        pass
    # The session has an active run: maybe one whose process died. Reap and try once more.
    session_id = live.ask.session_id
    reaped = liveness.reap_stale_runs(session_id=session_id) if session_id else []
    if reaped:
        registry.loop.call_soon_threadsafe(liveness.announce, reaped)
        try:
            return Creation([live]).run()
        except IntegrityError:
            pass
    live.refusal = RunConflict("A run is already in progress in this session.")
