"""Two hundred users at once through nginx, each in a chat of their own: half on the chat page's
socket, half on the API's server-sent events, every answer streaming at the same time. Every
piece of an answer carries its user's marker, so a piece that reached another user, or never
arrived, shows."""

from __future__ import annotations

import asyncio
import html
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import pytest
from django.contrib.auth.hashers import make_password
from django.test import Client

from sessions_app.models import CallKind, LLMCall, Message, Run, RunStatus, Session, User
from testkit.parley import ParleyProcess
from testkit.upstream import Reply, ScriptedUpstream
from tests.support.apiclient import bearer, parse_sse
from tests.support.chatsocket import ChatTab, shown_text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

USERS = 200
PIECES = 12  # of each answer, as the model streams it
MARKER = re.compile(r"mark-\d{3}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PIECE = re.compile(r'<span hx-swap-oob="beforeend:#run-([^"]+)-text">(.*?)</span>', re.S)
FINISHED = re.compile(r'data-run-id="([^"]+)" data-run-status="(?!running)([a-z]+)"')
NEW_SESSION = re.compile(r'id="composer-session" name="session_id" value="([^"]+)"')
BOUND = 90.0  # seconds for everything a user does: a hang fails, it does not stall the suite


@dataclass
class LoadUser:
    user: User
    marker: str
    on_socket: bool
    cookie: str = ""  # for the socket: a logged-in browser's session
    headers: dict[str, str] = field(default_factory=dict)  # for the API: a token

    @property
    def input(self) -> str:
        return f"Say it back: {self.marker}"

    @property
    def answer(self) -> str:
        return "".join(pieces_of(self.marker))


@dataclass
class Received:
    """What one user's client was sent."""

    run_id: str
    session_id: str
    status: str  # the run's, as the client was last told
    pieces: list[tuple[str, str]]  # (run id, text) of each streamed piece
    text: str  # the answer as its pieces built it up
    final: str  # what the client was sent once the run finished
    everything: str  # every frame or event, as sent


def pieces_of(marker: str) -> list[str]:
    return [f"{marker}:{i} " for i in range(PIECES)]


def tagged_echo(released: threading.Event) -> Callable[[dict], Reply]:
    """The model: the marker of the user message, in each piece of the answer, once released."""

    def reply(body: dict) -> Reply:
        found = MARKER.search(str(body["messages"][-1]["content"]))
        assert found is not None, body
        return Reply(chunks=pieces_of(found.group()), delay=0.05, held=released)

    return reply


def load_users(secret_key: str, settings) -> list[LoadUser]:
    """USERS users, no password (logging in is not what is measured); a browser session for
    each socket user, signed as serve signs them, and a token for each API user."""
    users = User.objects.bulk_create(
        User(username=f"load{n:03d}", password=make_password(None)) for n in range(USERS)
    )
    settings.SECRET_KEY = secret_key
    load = []
    for n, user in enumerate(users):
        one = LoadUser(user, f"mark-{n:03d}", on_socket=n % 2 == 0)
        if one.on_socket:
            browser = Client()
            browser.force_login(user)
            one.cookie = f"sessionid={browser.cookies['sessionid'].value}"
        else:
            one.headers = bearer(user)
        load.append(one)
    return load


async def on_the_socket(deployed: ParleyProcess, user: LoadUser, watching: set[str]) -> Received:
    """As the chat page sends a first message, in a new chat; until the answer is finished."""
    tab = await ChatTab.open(deployed, user.cookie)
    try:
        await tab.send(action="send", session_id="", input=user.input)
        await tab.until('data-run-id="', timeout=BOUND)
        watching.add(user.marker)
        final = await tab.until(FINISHED, timeout=BOUND)
        run_id, status = FINISHED.search(final).groups()
    finally:
        await tab.socket.close()
    everything = "".join(tab.frames)
    session = NEW_SESSION.search(everything)
    pieces = [(rid, html.unescape(text)) for rid, text in PIECE.findall(everything)]
    return Received(
        run_id=run_id,
        session_id=session.group(1) if session else "",
        status=status.upper(),
        pieces=pieces,
        text=shown_text(tab.frames, run_id),
        final=html.unescape(final),
        everything=html.unescape(everything),
    )


async def as_events(api: httpx.AsyncClient, user: LoadUser) -> Received:
    """POST /api/runs, streamed; every event until the stream ends."""
    payload = {"input": user.input, "stream": True}
    async with api.stream("POST", "/api/runs", json=payload, headers=user.headers) as response:
        assert response.status_code == 200, await response.aread()
        lines = [line async for line in response.aiter_lines()]
    events = parse_sse(lines)
    assert [data["seq"] for _, data in events] == list(range(1, len(events) + 1)), events
    kind, last = events[-1]
    pieces = [(data["run_id"], data["content"]) for k, data in events if k == "RunContent"]
    assert [k for k, _ in events] == ["RunStarted", *["RunContent"] * len(pieces), kind], events
    return Received(
        run_id=events[0][1]["run_id"],
        session_id=events[0][1]["session_id"],
        status=kind.removeprefix("Run").upper(),
        pieces=pieces,
        text="".join(text for _, text in pieces),
        final=last.get("content", ""),
        everything="\n".join(lines),
    )


async def release_together(
    upstream: ScriptedUpstream, released: threading.Event, watching: set[str], sockets: int
) -> None:
    """Let the model answer once every run has asked it and every socket watches its chat, so
    that all answers stream at once; at the latest after a few seconds, well before Parley
    would give up waiting for the model's first word (LLM_READ_TIMEOUT)."""
    for _ in range(100):  # 5 s
        if len(upstream.requests) >= USERS and len(watching) >= sockets:
            break
        await asyncio.sleep(0.05)
    released.set()


async def everyone_at_once(
    deployed: ParleyProcess, upstream: ScriptedUpstream, users: list[LoadUser]
) -> list[Received]:
    released, watching = threading.Event(), set[str]()
    upstream.script(*[tagged_echo(released)] * USERS)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    api = httpx.AsyncClient(base_url=deployed.base_url, timeout=BOUND, limits=limits)
    try:
        async with api:
            tasks = [
                on_the_socket(deployed, user, watching) if user.on_socket else as_events(api, user)
                for user in users
            ]
            sockets = sum(user.on_socket for user in users)
            together = release_together(upstream, released, watching, sockets)
            *received, _ = await asyncio.gather(*tasks, together)
            return received
    finally:
        released.set()  # no held answer outlives the test


def in_a_thread_of_its_own(deployed, upstream, users) -> list[Received]:
    """Its own event loop: the browser tests leave Playwright's marked as running on this one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        work = pool.submit(asyncio.run, everyone_at_once(deployed, upstream, users))
        return work.result(timeout=BOUND + 10)


def assert_only_its_own(user: LoadUser, seen: Received) -> None:
    """Each piece is of this user's run and bears this user's marker alone; nothing the client
    was sent names another run, chat or marker; no piece went missing."""
    assert seen.status == "COMPLETED", (user.marker, seen.everything[-500:])
    assert seen.pieces, f"{user.marker}: no piece streamed"
    for run_id, text in seen.pieces:
        assert run_id == seen.run_id, (user.marker, run_id, text)
        assert set(MARKER.findall(text)) == {user.marker}, (user.marker, text)
    assert set(MARKER.findall(seen.everything)) == {user.marker}
    assert set(UUID.findall(seen.everything)) <= {seen.run_id, seen.session_id}
    assert seen.text == user.answer, (user.marker, seen.text)
    assert user.answer.strip() in seen.final, (user.marker, seen.final)


def assert_stored_as_run(users: list[LoadUser], received: list[Received]) -> None:
    """One chat, one completed run, its two messages and one model call per user: no more."""
    mine = [user.user for user in users]
    assert Session.objects.filter(user__in=mine).count() == USERS
    assert Run.objects.filter(user__in=mine).count() == USERS
    assert Message.objects.filter(session__user__in=mine).count() == 2 * USERS
    assert LLMCall.objects.filter(user__in=mine).count() == USERS
    for user, seen in zip(users, received, strict=True):
        run = Run.objects.select_related("session").get(user=user.user)
        assert (str(run.run_id), run.session.session_id) == (seen.run_id, seen.session_id)
        assert run.status == RunStatus.COMPLETED
        assert (run.input, run.content) == (user.input, user.answer)
        messages = Message.objects.filter(run=run, session=run.session).order_by("order")
        assert [(m.role, m.content) for m in messages] == [
            ("user", user.input),
            ("assistant", user.answer),
        ]
        call = LLMCall.objects.get(run=run)
        assert (call.kind, call.ok, call.session_id, call.user_id) == (
            CallKind.CHAT,
            True,
            run.session.pk,
            user.user.pk,
        )


def test_two_hundred_users_stream_at_once_each_seeing_only_their_own_answer(
    deployed: ParleyProcess, upstream: ScriptedUpstream, serve_environment, settings
):
    users = load_users(serve_environment["SECRET_KEY"], settings)

    received = in_a_thread_of_its_own(deployed, upstream, users)

    for user, seen in zip(users, received, strict=True):
        assert_only_its_own(user, seen)
    assert len({seen.run_id for seen in received}) == USERS
    assert len({seen.session_id for seen in received}) == USERS
    assert len(upstream.requests) == USERS
    assert_stored_as_run(users, received)
