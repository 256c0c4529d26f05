"""`GET /v1/models` and `POST /v1/chat/completions`: Bearer tokens only (no cookie, so no CSRF
to check), every answer and error in OpenAI's shapes. A completion is an ordinary Parley run,
started by the engine as the chat page's and the REST API's are."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from openai_app import agents, conversation, placement, shapes
from openai_app.errors import OpenAIError, bad_key, translated
from openai_app.request import ChatRequest, parse
from sessions_app import engine
from sessions_app.accounts import PREFIX, TokenClaim, user_for_token
from sessions_app.engine.dbthread import in_db_thread
from sessions_app.llm.errors import status_for_error
from sessions_app.models import RunSource, RunStatus, User
from sessions_app.services.access import NotFound

log = logging.getLogger("parley.openai")

SESSION_HEADERS = ("X-Parley-Session-Id", "X-OpenWebUI-Chat-Id")
KEEPALIVE_SECONDS = 15.0


def _raw_token(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise bad_key("You didn't provide a Parley API token (Authorization: Bearer prl_…).")
    if not token.strip().startswith(PREFIX):
        raise bad_key("The key is not a Parley API token (those begin with prl_).")
    return token.strip()


def _user(raw: str) -> User:
    """The token's user (an expired token raises TokenExpired, which says when)."""
    found = user_for_token(raw)
    if found is None:
        raise bad_key()
    return found


def _method_not_allowed(allowed: str) -> HttpResponse:
    error = OpenAIError(405, f"Use {allowed} on this path.", code="method_not_allowed")
    response = error.response()
    response["Allow"] = allowed
    return response


@csrf_exempt
async def unknown_path(request: HttpRequest) -> HttpResponse:
    message = f"Unknown request URL: {request.method} {request.path}."
    return OpenAIError(404, message, code="unknown_url").response()


@csrf_exempt
async def list_models(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return _method_not_allowed("GET")
    try:
        raw = _raw_token(request)
        data = await in_db_thread(lambda: agents.models_for(_user(raw)))()
    except Exception as exc:
        return _failure(exc)
    return JsonResponse({"object": "list", "data": data})


@csrf_exempt
async def retrieve_model(request: HttpRequest, model: str) -> HttpResponse:
    if request.method != "GET":
        return _method_not_allowed("GET")
    try:
        raw = _raw_token(request)
        found = await in_db_thread(lambda: agents.model_named(_user(raw), model))()
    except Exception as exc:
        return _failure(exc, model)
    return JsonResponse(found)


def _metadata(chat: ChatRequest) -> dict[str, Any]:
    """What a new session keeps of the request: its metadata, and OpenAI's `user`."""
    kept = {k: v for k, v in chat.metadata.items() if k != "session_id"}
    return {**kept, "openai_user": chat.user} if chat.user else kept


def _named_session(request: HttpRequest, chat: ChatRequest) -> str | None:
    for header in SESSION_HEADERS:
        value = request.headers.get(header, "").strip()
        if value:
            return value
    return chat.metadata.get("session_id") or None


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _method_not_allowed("POST")
    chat: ChatRequest | None = None
    try:
        raw = _raw_token(request)
        chat = parse(request.body)
        if chat.messages[-1]["role"] == "tool":
            handle = await _go_on(raw, chat, _named_session(request, chat))
        else:
            handle = await _start(raw, chat, _named_session(request, chat))
    except Exception as exc:
        return _failure(exc, chat.model if chat else "")
    if chat.stream:
        response = _streamed(handle, chat)
    else:
        response = await _whole(handle, chat)
    response["X-Parley-Session-Id"] = str(handle.session_id)
    response["X-Parley-Run-Id"] = str(handle.run_id)
    return response


def _options(chat: ChatRequest, **more: Any) -> engine.RunOptions:
    return engine.RunOptions(
        source=RunSource.OPENAI,
        sampling=chat.sampling,
        tools=chat.tools,
        tool_choice=chat.tool_choice,
        **more,
    )


async def _start(raw: str, chat: ChatRequest, named: str | None) -> engine.RunHandle:
    """A new turn: a run in the session its conversation is."""
    turns = conversation.turns_of(chat.messages)
    options = _options(chat, system=turns.system, named_session=named)
    where = (chat.model, turns, named, _metadata(chat), options.client_tools)
    options = dataclasses.replace(options, place=functools.partial(placement.place, *where))
    # The token is checked with the run's creation, as /api/runs checks it: one trip.
    return await engine.start_run(TokenClaim(raw), turns.question, options=options)


async def _go_on(raw: str, chat: ChatRequest, named: str | None) -> engine.RunHandle:
    """Tool results: the run that called those tools goes on."""
    found = engine.answered(conversation.tool_results(chat.messages))
    if found is None:
        message = "The tool messages must answer the tool calls of one response of Parley's."
        raise OpenAIError(400, message, param="messages", code="tool_call_not_found")
    run_id, results = found
    options = _options(chat)

    def caller() -> User:
        user = _user(raw)
        placement.paused_run(user, chat.model, named, run_id, options.client_tools)
        return user

    user = await in_db_thread(caller)()
    try:
        return await engine.continue_run(user, run_id, results, options=options)
    except engine.RunConflict as exc:  # answered already, stopped, or the session went on
        raise OpenAIError(409, str(exc), param="messages", code="tool_calls_not_waiting",
                          headers={"X-Should-Retry": "false"}) from None  # fmt: skip
    except NotFound:  # deleted meanwhile
        raise placement.no_such_run() from None


async def _whole(handle: engine.RunHandle, chat: ChatRequest) -> HttpResponse:
    run = await handle.wait()
    # A stopped answer (its owner pressed Stop) is what there is of it, as a stream ends.
    if run.status not in (RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.PAUSED):
        return _run_failure(run.status, run.error).response()
    pending = handle.pending if run.status == RunStatus.PAUSED else []
    return JsonResponse(shapes.completion(run, chat.model, shapes.Part.of(handle), pending))


def _run_failure(status: str, error: str) -> OpenAIError:
    if status == RunStatus.INTERRUPTED:
        return OpenAIError(503, error, type="server_error", headers={"Retry-After": "2"})
    # The run and its error are stored: an SDK's automatic retry would make another run (and,
    # for a first turn, another session) beside it. Sending again is the caller's choice.
    return OpenAIError(
        status_for_error(error),
        error,
        type="api_error",
        code="upstream_error",
        headers={"X-Should-Retry": "false"},
    )


def _streamed(handle: engine.RunHandle, chat: ChatRequest) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_chunks(handle, chat), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _data(payload: dict[str, Any] | str) -> str:
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {text}\n\n"


ENDS = ("RunCompleted", "RunCancelled", "RunPaused", "RunError")
DONE = _data("[DONE]")


async def _chunks(handle: engine.RunHandle, chat: ChatRequest) -> AsyncIterator[str]:
    """The run's events as chunks: the role first, a chunk per piece, then its end (see
    `_end`) and `[DONE]`. A client that leaves stops only this; the run goes on and is kept.

    Each write is a trip through Django, daphne and the socket, for every stream at once: the
    end goes in one, so that a stream takes as many as the REST API's. The role goes at once,
    as the REST API's RunStarted does: the client reads the headers while the model thinks."""
    created, part = int(time.time()), shapes.Part.of(handle)

    def shape(delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        return shapes.chunk(part, created, chat.model, delta, finish, chat.include_usage)

    pieces = shapes.ContentChunks(part, created, chat.model, chat.include_usage)
    yield _data(shape({"role": "assistant", "content": "", "refusal": None}))
    async for event in handle.events(idle=KEEPALIVE_SECONDS):
        if event is None:
            yield ": keep-alive\n\n"
        elif event["event"] == "RunContent":
            yield pieces.data(event["content"])
        elif event["event"] in ENDS:
            yield _end(event, shape, part, chat.include_usage) + DONE
            return
    # The events ended without the run's end: never pass that off as a whole answer.
    lost = OpenAIError(503, "The answer's stream ended early.", type="server_error")
    yield _data(lost.body()) + DONE


def _end(
    event: dict[str, Any], shape: Callable[..., dict[str, Any]], part: shapes.Part, usage: bool
) -> str:
    """A stream's last chunks: the client's tool calls if the run paused for them, the
    finish, the usage when asked; or the error."""
    kind = event["event"]
    if kind == "RunError":
        # Mid-stream, the status line is long gone: OpenAI sends the error as an event.
        return _data(_run_failure(event.get("status", RunStatus.ERROR), event["error"]).body())
    if kind == "RunPaused":
        calls = shapes.tool_calls(event["tool_calls"], streamed=True)
        ending = [shape({"tool_calls": calls}), shape({}, "tool_calls")]
    else:
        ending = [shape({}, shapes.finish_reason(event.get("error", "")))]
    if usage:
        ending.append({**shape(None), "usage": part.usage(event.get("metrics") or {})})
    return "".join(_data(found) for found in ending)


def _failure(exc: Exception, model: str = "") -> HttpResponse:
    error = translated(exc, model)
    if error is None:
        log.exception("a /v1 request failed")
        error = OpenAIError(500, "Parley failed while answering this request.", type="server_error")
    return error.response()
