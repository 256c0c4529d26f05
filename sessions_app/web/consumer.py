"""The chat WebSocket: JSON frames in (htmx ws-send), HTML fragments out (htmx OOB swaps).

A thin adapter: `send` asks the run engine for a run and returns at once, so a `stop` frame is
handled immediately and a closed socket does not stop the answer; watching a session is one
`events.subscribe`, whose snapshot and later events `feed` renders as HTML.
Frames and events are handled one at a time, in the order they came.
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

from sessions_app import engine, events
from sessions_app.models import Session
from sessions_app.services import outage, ratelimit
from sessions_app.services.access import NotFound, get_run_for_owner, get_session_for_user
from sessions_app.web import feed, rendering

log = logging.getLogger("parley.chat")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process


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

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        # This process now has a viewer to tell when a run of a process that died is reaped.
        engine.ensure_heartbeat()
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        self.unwatch()

    async def dispatch(self, message: dict[str, Any]) -> None:
        async with self.turn:
            await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
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
        except (NotFound, PermissionDenied):
            await self.notice("That chat was not found.")
        except engine.RunConflict:
            await self.notice("An answer is already in progress in this chat.")
        except engine.InputError as exc:
            await self.notice(exc.message)
        except ratelimit.RateLimited as exc:
            wait = f"{exc.retry_after:.0f}"
            doing = "starting new chats" if exc.kind == ratelimit.SESSION else "sending"
            await self.notice(f"You are {doing} too fast; try again in {wait} seconds.")
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
        handle = await engine.start_run(
            self.user, frame.get("input"), agent_id=agent_id, session_id=session_id
        )
        await self.send(text_data='<div id="notice" hx-swap-oob="innerHTML"></div>')
        if session_id is None or str(handle.session_id) != self.session_id:
            await self.watch(str(handle.session_id), new=session_id is None)

    async def do_stop(self, frame: dict[str, Any]) -> None:
        await engine.cancel_run(self.user, frame.get("run_id"))

    async def do_regenerate(self, frame: dict[str, Any]) -> None:
        run = await database_sync_to_async(get_run_for_owner)(self.user, frame.get("run_id"))
        await engine.start_run(self.user, run.input, session_id=run.session_id)

    async def do_watch(self, frame: dict[str, Any]) -> None:
        session_id = frame.get("session_id") or None
        if session_id is None:
            return self.unwatch()
        known = (frame.get("last_run_id") or None, (frame.get("last_run_status") or "").upper())
        await self.watch(session_id, known=known)

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
