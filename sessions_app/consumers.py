"""The chat WebSocket: JSON frames in (htmx ws-send), HTML fragments out (htmx OOB swaps).

The consumer never generates: `send` asks the run engine to start a run and returns at once, so a
`stop` frame is handled immediately and a closed socket does not stop the answer. Live events
arrive from the run engine directly when the run streams in this process, else through the
session's group (see `events.fanout`); when the consumer starts watching a session it renders
the conversation as it stands (with the answer streamed so far) and then applies only events with
a later `seq`, so reloads, reconnects and second tabs see no gap and no duplicate piece. Frames,
group messages and local events are handled one at a time, in the order they came.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import PermissionDenied

from sessions_app import engine, rendering
from sessions_app.events import fanout as realtime
from sessions_app.events import stream as streams
from sessions_app.models import ACTIVE_STATUSES, Run, Session
from sessions_app.process import WORKER_ID
from sessions_app.services import ratelimit
from sessions_app.services.access import NotFound, get_run_for_owner, get_session_for_user

log = logging.getLogger("parley.chat")

CLOSE_UNAUTHENTICATED = 4401
SNAPSHOT_TIMEOUT = 3.0
FINISHED = 2**31  # the seq "seen" for a run shown as finished: later events add nothing


class ChatConsumer(AsyncWebsocketConsumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn = asyncio.Lock()  # one handler at a time: frames, group messages, local events
        self.inbox: collections.deque[dict[str, Any]] = collections.deque()
        self.inbox_task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.session_id: str | None = None
        self.group: str | None = None
        self.seen: dict[str, int] = {}  # run_id -> last seq shown
        self.waiting: dict[str, list[dict[str, Any]]] = {}  # run_id -> events held for a snapshot
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        if self.session_id:
            realtime.unlisten(self.session_id, self.deliver)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.inbox_task is not None:
            self.inbox_task.cancel()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, without its `aclose_old_connections()` before every handler: a
        round trip through the one thread all ORM work queues on, so a frame waited behind
        other runs' transactions before its handler ran. Every database call this consumer
        makes goes through `database_sync_to_async` or the engine, which close stale
        connections themselves."""
        if message.get("type") == "run.event":
            if message.get("origin") == WORKER_ID:
                return  # streamed here: already delivered by the local listener
            async with self.turn:
                await self.run_event(message["event"])
            return
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        async with self.turn:
            await handler(message)

    def deliver(self, event: dict[str, Any]) -> None:
        """The local listener: an event of a run streaming in this process, shown in order."""
        self.inbox.append(event)
        if self.inbox_task is None:
            self.inbox_task = asyncio.get_running_loop().create_task(self.show_inbox())

    async def show_inbox(self) -> None:
        try:
            async with self.turn:
                while self.inbox:
                    await self.run_event(self.inbox.popleft())
        finally:
            self.inbox_task = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = json.loads(text_data or "")
        except (json.JSONDecodeError, TypeError):
            await self.notice("That message could not be read (it was not JSON).")
            return
        if not isinstance(frame, dict):
            await self.notice("That message could not be read (expected a JSON object).")
            return
        handler = {
            "watch": self.do_watch,
            "send": self.do_send,
            "stop": self.do_stop,
            "regenerate": self.do_regenerate,
        }.get(frame.get("action"))
        if handler is None:
            await self.notice("Unknown action.")
            return
        try:
            await handler(frame)
        except (NotFound, PermissionDenied):
            await self.notice("That chat was not found.")
        except engine.RunConflict:
            await self.notice("An answer is already in progress in this chat.")
        except engine.InputError as exc:
            await self.notice(exc.message)
        except ratelimit.RateLimited as exc:
            await self.notice(
                f"You are sending too fast; try again in {exc.retry_after:.0f} seconds."
            )
        except Exception:
            log.exception("chat frame failed")
            await self.notice("Something went wrong on our side; please try again.")

    async def notice(self, message: str) -> None:
        await self.send(text_data=rendering.render_notice(message))

    # Actions

    async def do_send(self, frame: dict[str, Any]) -> None:
        session_id = frame.get("session_id") or None
        handle = await engine.start_run(
            self.user,
            frame.get("input"),
            agent_id=frame.get("agent_id") or None,
            session_id=session_id,
        )
        await self.notice_clear()
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
            await self.unwatch()
            return
        await self.watch(
            session_id,
            known_run=frame.get("last_run_id") or None,
            known_status=frame.get("last_run_status") or None,
        )

    async def notice_clear(self) -> None:
        await self.send(text_data='<div id="notice" hx-swap-oob="innerHTML"></div>')

    # Watching a session

    async def unwatch(self) -> None:
        if self.session_id:
            realtime.unlisten(self.session_id, self.deliver)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.group = self.session_id = None
        self.seen.clear()
        self.waiting.clear()
        self.inbox.clear()

    async def watch(
        self,
        session_id: str,
        *,
        new: bool = False,
        known_run: str | None = None,
        known_status: str | None = None,
    ) -> None:
        session = await database_sync_to_async(get_session_for_user)(self.user, session_id)
        await self.unwatch()
        self.session_id = str(session.session_id)
        self.group = realtime.group_name(session.session_id)
        # Join first, then look: any event published after this point reaches us.
        realtime.listen(self.session_id, self.deliver)
        await self.channel_layer.group_add(self.group, self.channel_name)
        runs_now, used = await database_sync_to_async(_session_runs)(session)
        last = runs_now[-1] if runs_now else None
        active = last if last is not None and last.status in ACTIVE_STATUSES else None
        views = []
        settle_now: str | None = None
        for run in runs_now:
            run_id = str(run.run_id)
            if run is active:
                stream = streams.get_stream(run.run_id)
                if stream is not None:  # streaming in this process: exact snapshot
                    self.seen[run_id] = stream.seq
                    views.append(rendering.run_view(run, streaming_text=stream.content_so_far()))
                    continue
                # Streaming elsewhere: show the last checkpoint, ask its process for the rest.
                self.waiting[run_id] = []
                self.seen[run_id] = run.content_seq
                if run.worker == WORKER_ID or not realtime.crosses_processes():
                    # No other process has it: it finished a moment ago, or its process died.
                    settle_now = run_id
                else:
                    await realtime.request_snapshot(run.worker, run_id, self.channel_name)
                    asyncio.get_running_loop().call_later(
                        SNAPSHOT_TIMEOUT,
                        lambda r=run_id: asyncio.ensure_future(self.snapshot_timeout(r)),
                    )
            else:
                # Finished: the stored run already shows everything its events (some perhaps
                # still in flight through the channel layer) would add.
                self.seen[run_id] = FINISHED
            views.append(rendering.run_view(run, tools=used.get(run_id)))
        unchanged = (
            active is None
            and last is not None
            and known_run == str(last.run_id)
            and (known_status or "").upper() == last.status
        )
        parts = [] if unchanged else [rendering.render_messages(views)]
        parts.append(rendering.render_composer_actions(str(active.run_id) if active else None))
        if new:
            parts.append(rendering.render_new_session(session))
        await self.send(text_data="".join(parts))
        if settle_now is not None:
            await self.settle_from_database(settle_now)

    # Live events

    async def run_event(self, event: dict[str, Any]) -> None:
        if event["session_id"] != self.session_id:
            return
        run_id = event["run_id"]
        if run_id in self.waiting:
            self.waiting[run_id].append(event)
            return
        await self.show(event)

    async def show(self, event: dict[str, Any]) -> None:
        run_id = event["run_id"]
        seen = self.seen.get(run_id, 0)
        if event["seq"] <= seen:
            return  # already part of what this socket shows
        self.seen[run_id] = event["seq"]
        kind = event["event"]
        if kind == "RunStarted":
            view = rendering.answer_view(
                run_id=run_id, status="RUNNING", input=event["input"], content=""
            )
            html = (
                f'<div id="messages" hx-swap-oob="beforeend">{rendering.render_run(view)}</div>'
                + rendering.render_composer_actions(run_id)
            )
        elif kind == "RunContent":
            html = rendering.render_piece(run_id, event["content"])
        else:
            status = {"RunCompleted": "COMPLETED", "RunCancelled": "CANCELLED"}.get(
                kind, event.get("status", "ERROR")
            )
            view = rendering.answer_view(
                run_id=run_id,
                status=status,
                input="",
                content=event.get("content", ""),
                error=event.get("error", ""),
                metrics=event.get("metrics"),
                tools=event.get("tools"),
            )
            html = rendering.render_assistant(view, oob=True) + rendering.render_composer_actions(
                None
            )
        await self.send(text_data=html)

    async def session_renamed(self, message: dict[str, Any]) -> None:
        if message["session_id"] != self.session_id:
            return
        session = await Session.objects.aget(pk=message["session_id"])
        await self.send(text_data=rendering.render_title(session))

    async def run_snapshot(self, message: dict[str, Any]) -> None:
        run_id = message["run_id"]
        if run_id not in self.waiting:
            return
        if not message.get("found"):
            await self.settle_from_database(run_id)  # it finished meanwhile
            return
        held = self.waiting.pop(run_id)
        run = await Run.objects.aget(pk=run_id)
        self.seen[run_id] = message["seq"]
        view = rendering.run_view(run, streaming_text=message["content"])
        await self.send(text_data=rendering.render_assistant(view, oob=True))
        for event in held:
            await self.show(event)

    async def snapshot_timeout(self, run_id: str) -> None:
        async with self.turn:
            await self.settle_from_database(run_id)

    async def settle_from_database(self, run_id: str) -> None:
        """Show a run as stored: no process answered for it (it finished, or its process died
        or did not reply in time), so the database is the truth."""
        held = self.waiting.pop(run_id, None)
        if held is None:
            return
        run = await Run.objects.aget(pk=run_id)
        if not run.is_active:
            self.seen[run_id] = FINISHED
            await self.send(
                text_data=rendering.render_assistant(rendering.run_view(run), oob=True)
                + rendering.render_composer_actions(None)
            )
            return
        self.seen[run_id] = run.content_seq
        await self.send(text_data=rendering.render_assistant(rendering.run_view(run), oob=True))
        for event in held:
            await self.show(event)


def _session_runs(session: Session) -> tuple[list[Run], dict[str, list[dict[str, str]]]]:
    return list(session.runs.order_by("position")), rendering.tools_by_run(session)
