"""The chat WebSocket: JSON frames in (htmx ws-send), HTML fragments out (htmx OOB swaps).

A thin adapter: `send` asks the run engine for a run and returns at once, so a `stop` frame is
handled immediately and a closed socket does not stop the answer; watching a session is one
`events.subscribe`, whose snapshot and later events `feed` renders as HTML.
Frames and events are handled one at a time, in the order they came.
A socket lasts only as long as its sign-in: it closes when that browser signs out, the password
changes elsewhere (4401) or the account is deactivated (4403), told by `accounts.signout`; and
each frame is served only while the account is active, as the database says at that moment.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError

from sessions_app import accounts, engine, events
from sessions_app.accounts import signout
from sessions_app.models import RunSource, Session
from sessions_app.services import outage, ratelimit
from sessions_app.services.access import NotFound, get_run_for_owner, get_session_for_user
from sessions_app.web import feed, rendering

CHAT = engine.RunOptions(source=RunSource.CHAT)
log = logging.getLogger("parley.chat")

CLOSE_UNAUTHENTICATED = 4401  # not signed in, or not any more: signing in again helps
CLOSE_FORBIDDEN = 4403  # the account was deactivated: signing in again does not help
CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process

# How a socket whose sign-in ended says so, and the code it closes with.
ENDINGS = {
    signout.SIGNED_OUT: (CLOSE_UNAUTHENTICATED, "You signed out in this browser; sign in again."),
    signout.PASSWORD_CHANGED: (
        CLOSE_UNAUTHENTICATED,
        "Your password was changed; sign in again with the new one.",
    ),
    signout.DEACTIVATED: (CLOSE_FORBIDDEN, "Your account has been deactivated."),
}


class ChatConsumer(AsyncWebsocketConsumer):
    # What a frame may ask for; each is handled by the method do_<action>.
    ACTIONS = ("watch", "send", "stop", "regenerate")
    # No channel of its own on the channel layer: events come through `events.subscribe`. With
    # one, a Redis restart would end every socket (channels closes it, 1011, when that channel's
    # receive fails). An alias that names no configured layer gives the consumer none.
    channel_layer_alias = "none"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn = asyncio.Lock()  # one frame or event at a time
        self.session_id: str | None = None
        self.follower: asyncio.Task[None] | None = None
        self.signin: signout.SignIn | None = None
        self.ended = False  # its sign-in ended: the socket is closing, frames are ignored
        self.ending: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        # This process now has a viewer to tell when a run of a process that died is reaped.
        engine.ensure_heartbeat()
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.signin = await signout.listen(self.scope["session"], self.user, self.signed_out)

    async def disconnect(self, code: int) -> None:
        self.unwatch()
        if self.signin is not None:
            signout.forget(self.signin)
            self.signin = None

    def signed_out(self, reason: str) -> None:
        """Told that this socket's sign-in ended (elsewhere: another request, another process)."""

        async def end() -> None:
            async with self.turn:  # after the frame in hand, before any other
                if self.signin is not None:  # not disconnected meanwhile
                    await self.end(reason)

        if self.ending is None:
            self.ending = asyncio.get_running_loop().create_task(end())

    async def end(self, reason: str) -> None:
        if self.ended:
            return
        self.ended = True
        self.unwatch()
        code, message = ENDINGS[reason]
        await self.notice(message)
        await self.close(code=code)

    async def dispatch(self, message: dict[str, Any]) -> None:
        async with self.turn:
            await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.ended:
            return
        size = len(text_data.encode()) if text_data is not None else len(bytes_data or b"")
        if size > settings.PARLEY_MAX_SOCKET_MESSAGE_BYTES:
            limit = settings.PARLEY_MAX_SOCKET_MESSAGE_BYTES
            await self.notice(f"That message is too large: at most {limit} bytes.")
            return await self.close(code=CLOSE_TOO_BIG)
        try:
            frame = json.loads(text_data or "")
        except (json.JSONDecodeError, TypeError):
            return await self.notice("That message could not be read (it was not JSON).")
        if not isinstance(frame, dict):
            return await self.notice("That message could not be read (expected a JSON object).")
        action = frame.get("action")
        if action not in self.ACTIONS:
            return await self.notice("Unknown action.")
        handler = getattr(self, f"do_{action}")
        try:
            await handler(frame)
        except accounts.Inactive:
            await self.end(signout.DEACTIVATED)
        except NotFound:
            await self.notice("That chat was not found.")
        except PermissionDenied as exc:  # staff without the right, or not the session's owner
            await self.notice(str(exc) or "You may not do that here.")
        except engine.RunConflict:
            await self.notice("An answer is already in progress in this chat.")
        except engine.InputError as exc:
            await self.notice(exc.message)
        except engine.NotServing as exc:
            await self.notice(str(exc))
        except ratelimit.RateLimited as exc:
            wait = exc.seconds
            doing = "starting new chats" if exc.kind == ratelimit.SESSION else "sending"
            said = f"You are {doing} too fast; try again in {wait} seconds."
            await self.notice(exc.in_words() or said)
        except DatabaseError as exc:
            message = outage.describe(exc)
            log.error("chat frame failed: %s", exc, exc_info=message is None)
            await self.notice(message or "Something went wrong on our side; please try again.")
        except Exception:
            log.exception("chat frame failed")
            await self.notice("Something went wrong on our side; please try again.")

    async def notice(self, message: str) -> None:
        await self.send(text_data=rendering.render_notice(message))

    async def do_send(self, frame: dict[str, Any]) -> None:
        session_id = frame.get("session_id") or None
        agent_id = frame.get("agent_id") or None
        # The user as the database has it now, read as the run is created.
        handle = await engine.start_run(
            accounts.SignedIn(self.user.pk),
            frame.get("input"),
            agent_id=agent_id,
            session_id=session_id,
            options=CHAT,
        )
        await self.send(text_data='<div id="notice" hx-swap-oob="innerHTML"></div>')
        if session_id is None or str(handle.session_id) != self.session_id:
            await self.watch(str(handle.session_id), new=session_id is None)

    async def do_stop(self, frame: dict[str, Any]) -> None:
        await self.refresh_user()
        await engine.cancel_run(self.user, frame.get("run_id"))

    async def do_regenerate(self, frame: dict[str, Any]) -> None:
        run = await database_sync_to_async(get_run_for_owner)(self.user, frame.get("run_id"))
        signed_in = accounts.SignedIn(self.user.pk)
        await engine.start_run(signed_in, run.input, session_id=run.session_id, options=CHAT)

    async def do_watch(self, frame: dict[str, Any]) -> None:
        session_id = frame.get("session_id") or None
        if session_id is None:
            return self.unwatch()
        known = (frame.get("last_run_id") or None, (frame.get("last_run_status") or "").upper())
        await self.refresh_user()
        await self.watch(session_id, known=known)

    async def refresh_user(self) -> None:
        """The user as the database has it now; Inactive once deactivated or removed."""
        self.user = await database_sync_to_async(accounts.active_user)(self.user.pk)

    async def watch(
        self, session_id: str, *, new: bool = False, known: tuple[str | None, str] = (None, "")
    ) -> None:
        """Show the session as it stands, then follow it. `known` is the last run (and its
        status) the page shows already: when that is still so, the messages are not sent."""
        session = await database_sync_to_async(get_session_for_user)(self.user, session_id)
        self.unwatch()
        self.session_id = str(session.session_id)
        follow = self.follow(session, new, known)
        self.follower = asyncio.get_running_loop().create_task(follow)

    def unwatch(self) -> None:
        if self.follower is not None:
            self.follower.cancel()  # which closes its subscription
        self.follower = self.session_id = None

    async def follow(self, session: Session, new: bool, known: tuple[str | None, str]) -> None:
        try:
            async for event in events.subscribe(session.session_id):
                async with self.turn:
                    if event["event"] == "Snapshot":
                        html = await feed.page(session, event, new, known)
                    else:
                        html = await feed.fragment(event)
                    await self.send(text_data=html)
        except Exception:
            # The page reconnects and watches afresh; a quiet dead feed would look connected.
            log.exception("following a chat failed")
            await self.close()
