"""A run's answer: rounds of model calls, streamed as merged pieces, saved as it goes, stored.

The task that runs `generate` belongs to the engine, not to whoever asked: a closed WebSocket or
SSE client does not stop it; `cancel_run` and the server stopping (see lifespan) do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from django.db import DatabaseError

from sessions_app.engine import store
from sessions_app.engine.coalesce import Coalescer, checkpoint_interval
from sessions_app.engine.dbthread import in_db_thread
from sessions_app.engine.early import EarlyRequest
from sessions_app.engine.errors import CUT, INTERRUPTED, UNSAVED
from sessions_app.engine.live import LiveRun
from sessions_app.engine.registry import registry
from sessions_app.events.stream import RunStream
from sessions_app.llm import client as llm
from sessions_app.llm.errors import LLMError
from sessions_app.models import Run, RunStatus
from sessions_app.services import context, memory

log = logging.getLogger("parley.runs")

# A model that keeps calling tools gets this many rounds, then must answer.
MAX_TOOL_ROUNDS = 5
# Longest stretch (s) the engine parses a fast upstream's deltas before letting others run.
YIELD_EVERY = 0.005
# Longest pause (s) of a streaming answer while other runs are being started.
GIVE_WAY = 0.05


async def generate(live: LiveRun, early: EarlyRequest | None) -> Run:
    answer = _Answer(live, early)
    status, error = await answer.produce()
    stream, content, tools = answer.stream, "".join(answer.parts), answer.tools_used()
    try:
        saved = await answer.store(status, error)
    except DatabaseError:
        # Its clients are told; the run, left as last saved, is marked interrupted in time.
        _announce(stream, answer.run, RunStatus.INTERRUPTED, UNSAVED, content, tools)
        raise
    _announce(stream, saved, status, error, content, tools, live.pending)
    memory.after_run(saved)
    return saved


class _Answer:
    def __init__(self, live: LiveRun, early: EarlyRequest | None) -> None:
        plan, stream = live.plan, live.stream
        assert plan is not None and stream is not None, "launched before it was created"
        self.live = live
        self.plan = plan
        self.run = plan.run
        self.stream = stream
        self.early = early
        self.coalescer = Coalescer(stream, lambda: len(registry.streaming))
        self.messages = list(plan.messages)
        # Everything the user saw streamed, across tool rounds (and pauses).
        self.parts: list[str] = [plan.before.said] if plan.before else []
        self.round_text: list[str] = []  # of the current round's answer row
        self.calls: list[store.Call] = []
        self.cut = False  # the last model call stopped at its length limit
        self.assistant_id = plan.assistant_message_id
        self.started = early.started if early is not None else time.perf_counter()
        self.first_token = plan.before.first_token if plan.before else None  # over its pauses
        self.first_piece = False  # of this stretch of it
        self.next_checkpoint = time.monotonic() + checkpoint_interval(len(registry.streaming))
        self.last_yield = 0.0  # the first delta yields at once, so its piece goes out first
        self.starts = registry.starts
        self.gave_way = 0  # the round of starts this answer last paused for

    async def produce(self) -> tuple[str, str]:
        """Call the model until it answers without asking for tools; how the run ended."""
        try:
            for round_number in range(MAX_TOOL_ROUNDS + 1):
                asked = await self._call_model(round_number)
                if not asked:
                    break
                if any(call["function"]["name"] in self.plan.client_tools for call in asked):
                    await self._pause(asked)
                    return RunStatus.PAUSED, ""
                await self._answer_tools(asked)
        except asyncio.CancelledError:
            # Its user's stop, or the server's (see lifespan), which keeps what it said so far.
            if self.live.cancel_requested:
                return RunStatus.CANCELLED, ""
            return RunStatus.INTERRUPTED, INTERRUPTED
        except LLMError as exc:
            return RunStatus.ERROR, exc.message
        except Exception:
            log.exception("run %s failed", self.run.run_id)
            return RunStatus.ERROR, "Parley failed while generating this answer."
        finally:
            self.coalescer.flush()
        return RunStatus.COMPLETED, CUT if self.cut else ""

    async def _call_model(self, round_number: int) -> list[dict[str, Any]]:
        """One request to the model, streamed; the tool calls it asked for, if any."""
        self.round_text = []
        end: llm.StreamEnd | None = None
        asked: list[dict[str, Any]] = []
        call_started, call_first = time.perf_counter(), None
        if round_number == 0 and self.early is not None:
            source, call_started = self.early.items(), self.early.started
        else:
            offered = self.plan.tools if round_number < MAX_TOOL_ROUNDS else []
            sampling = self.plan.first_sampling() if round_number == 0 else self.plan.sampling
            source = llm.stream_chat(self.run.model, self.messages, offered or None, sampling)
        try:
            async for item in source:
                if isinstance(item, llm.Delta):
                    if call_first is None:
                        call_first = time.perf_counter() - call_started
                        self._first_piece()
                    await self._take(item.content)
                elif isinstance(item, llm.ToolCallsDelta):
                    asked = item.tool_calls
                elif isinstance(item, llm.StreamEnd):
                    end = item
                    self.cut = item.finish_reason == "length"
        finally:
            duration = time.perf_counter() - call_started
            text = "".join(self.round_text)
            self.calls.append(
                store.record_call(self.run, self.messages, text, end, call_first, duration)
            )
        return asked

    def _first_piece(self) -> None:
        if not self.first_piece:
            self.first_piece = True
            self.starts.done(self.run.run_id)
            if self.first_token is None:
                self.first_token = time.perf_counter() - self.started

    async def _take(self, piece: str) -> None:
        """A piece of the answer: shown, and now and then saved or made way for others."""
        self.parts.append(piece)
        self.round_text.append(piece)
        self.coalescer.add(piece)
        if self.starts.keys and self.gave_way != self.starts.round:
            # New runs first: a streaming answer pauses once per round of starts, briefly, so
            # that the few loop turns a starting run needs don't each wait behind every stream.
            self.gave_way = self.starts.round
            await self.starts.wait(GIVE_WAY)
        now = time.monotonic()  # per delta only a clock read: a fast upstream sends thousands
        if now >= self.next_checkpoint:
            self.coalescer.flush()  # what is saved is what was sent: `seq` counts it
            content = "".join(self.parts)
            if not await store.checkpoint(self.live, content, self.stream.seq):
                raise asyncio.CancelledError  # cancelled from another process
            self.next_checkpoint = time.monotonic() + checkpoint_interval(len(registry.streaming))
        elif now - self.last_yield >= YIELD_EVERY:
            # A fast upstream's deltas arrive many to a socket read: let the first piece reach
            # its subscribers (a few loop turns), then let other runs in now and then.
            await asyncio.sleep(0.001 if self.last_yield == 0.0 else 0)
            self.last_yield = time.monotonic()

    async def _answer_tools(self, asked: list[dict[str, Any]]) -> None:
        text = "".join(self.round_text)
        reply = context.tool_round(text, asked)
        results, self.assistant_id = await in_db_thread(store.save_tool_round)(
            self.plan, self.assistant_id, text, asked
        )
        self.messages += [reply, *results]

    async def _pause(self, asked: list[dict[str, Any]]) -> None:
        """A call to a client's tool: the round is stored (the agent's own tools in it run
        now) and the run waits for the client's results."""
        text = "".join(self.round_text)
        self.live.pending = await in_db_thread(store.save_paused_round)(
            self.plan, self.assistant_id, text, asked
        )
        self.messages.append(context.tool_round(text, asked))

    async def store(self, status: str, error: str) -> Run:
        if self.calls and status != RunStatus.COMPLETED:
            self.calls[-1].ok, self.calls[-1].error = False, error
        ending = store.Finish(
            self.run,
            status,
            "".join(self.parts),
            error,
            self.calls,
            self.assistant_id,
            "".join(self.round_text),
            self.first_token,
            # Its end event's: a run going on (after a pause, or a failed try) streams after it.
            seq=self.stream.seq + 1,
            calls_before=self.plan.before.calls if self.plan.before else 0,
        )
        try:
            # Shielded: a second cancel (say, the server stopping) must not lose the answer.
            return await asyncio.shield(store.finish(ending))
        finally:
            registry.finished(self.live)

    def tools_used(self) -> list[dict[str, Any]]:
        """The tools this run called: after its user's turn (before it, the history's)."""
        users = [n for n, m in enumerate(self.messages) if m["role"] == "user"]
        own = self.messages[users[-1] + 1 :] if users else self.messages
        return [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for m in own
            for c in m.get("tool_calls") or ()
        ]


def _announce(
    stream: RunStream,
    saved: Run,
    status: str,
    error: str,
    content: str,
    tools: list[dict[str, Any]],
    pending: list[dict[str, Any]] | None = None,
) -> None:
    """The run's last event: the whole answer as streamed, its metrics and tool calls (and,
    paused, the calls its client is to run)."""
    ended = {"content": content, "metrics": saved.metrics(), "tools": tools}
    if status == RunStatus.COMPLETED:
        # An answer cut at the length limit says so; a whole one's event has no `error`.
        stream.publish("RunCompleted", **ended, **({"error": error} if error else {}))
    elif status == RunStatus.CANCELLED:
        stream.publish("RunCancelled", **ended)
    elif status == RunStatus.PAUSED:
        stream.publish("RunPaused", **ended, tool_calls=pending or [])
    else:
        stream.publish("RunError", error=error, status=status, **ended)
