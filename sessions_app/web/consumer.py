"""The chat WebSocket: JSON frames in (htmx ws-send), HTML fragments out (htmx OOB swaps).

A thin adapter: `send` asks the run engine for a run and returns at once, so a `stop` frame is
handled immediately and a closed socket does not stop the answer; watching a session is one
`events.subscribe`, whose snapshot is rendered whole and whose later events become fragments.
Frames and events are handled one at a time, in the order they came.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.core.exceptions import PermissionDenied

from sessions_app import engine, events
from sessions_app.models import Session
from sessions_app.services import ratelimit
from sessions_app.services.access import NotFound, get_run_for_owner, get_session_for_user
from sessions_app.web import rendering

log = logging.getLogger("parley.chat")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process
STATUS_OF = {"RunCompleted": "COMPLETED", "RunCancelled": "CANCELLED"}


class ChatConsumer(AsyncWebsocketConsumer):
    # What a frame may ask for; each is handled by the method do_<action>.
    ACTIONS = ("watch", "send", "stop", "regenerate")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn = asyncio.Lock()  # one frame or event at a time
        self.session_id: str | None = None
        self.follower: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        self.unwatch()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its `aclose_old_connections()` before every frame (a
        round trip to the database thread): every database call here goes through
        `database_sync_to_async` or the engine, which look after their connections."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        async with self.turn:
            await handler(message)

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
            await self.notice(f"You are sending too fast; try again in {wait} seconds.")
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
                        html = await page(session, event, new, known)
                    else:
                        html = await fragment(event)
                    await self.send(text_data=html)
        except Exception:
            # The page reconnects and watches afresh; a quiet dead feed would look connected.
            log.exception("following a chat failed")
            await self.close()


async def page(session: Session, snapshot: events.Event, new: bool, known: tuple) -> str:
    """The session as it stands: every run, the streaming one with its answer so far."""
    used = await database_sync_to_async(rendering.tools_by_run)(session)
    runs, streamed = snapshot["runs"], snapshot["streamed"]
    views = [
        rendering.run_view(
            run, streaming_text=streamed.get(str(run.run_id)), tools=used.get(str(run.run_id))
        )
        for run in runs
    ]
    active = next((str(run.run_id) for run in runs if run.is_active), None)
    last = runs[-1] if runs else None
    unchanged = not active and last is not None and known == (str(last.run_id), last.status)
    parts = [] if unchanged else [rendering.render_messages(views)]
    parts.append(rendering.render_composer_actions(active))
    if new:
        parts.append(rendering.render_new_session(session))
    return "".join(parts)


async def fragment(event: events.Event) -> str:
    """An event as the HTML that shows it."""
    kind, run_id = event["event"], event.get("run_id")
    if kind == "RunStarted":
        view = rendering.answer_view(
            run_id=run_id, status="RUNNING", input=event["input"], content=""
        )
        run = rendering.render_run(view)
        messages = f'<div id="messages" hx-swap-oob="beforeend">{run}</div>'
        return messages + rendering.render_composer_actions(run_id)
    if kind == "RunContent":
        return rendering.render_piece(run_id, event["content"])
    if kind == "SessionRenamed":
        return rendering.render_title(await Session.objects.aget(pk=event["session_id"]))
    if kind == "RunSnapshot":  # what another process has streamed, or the run as stored
        run = event["run"]
        view = rendering.run_view(run, streaming_text=event["content"] if run.is_active else None)
        finished = "" if run.is_active else rendering.render_composer_actions(None)
        return rendering.render_assistant(view, oob=True) + finished
    view = rendering.answer_view(
        run_id=run_id,
        status=STATUS_OF.get(kind, event.get("status", "ERROR")),
        input="",
        content=event.get("content", ""),
        error=event.get("error", ""),
        metrics=event.get("metrics"),
        tools=event.get("tools"),
    )
    return rendering.render_assistant(view, oob=True) + rendering.render_composer_actions(None)
