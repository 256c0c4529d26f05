"""Server-sent events: a run's events as `event: <type>` / `data: <json>` messages."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse

from sessions_app.schemas import RUN_EVENTS

# A comment line this often while the model is silent, so proxies keep the connection open.
KEEPALIVE_SECONDS = 15.0
COMPONENTS = "#/components/schemas/{model}"


def format_event(event: dict[str, Any]) -> str:
    data = {key: value for key, value in event.items() if key != "event"}
    return f"event: {event['event']}\ndata: {json.dumps(data, cls=DjangoJSONEncoder)}\n\n"


async def _with_keepalive(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    iterator = aiter(events)
    pending: asyncio.Future[dict[str, Any]] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_SECONDS)
            if not done:
                yield ": keep-alive\n\n"
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield format_event(event)
    finally:
        # The client left (or the run ended): stop listening. The run itself goes on.
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def event_stream(events: AsyncIterator[dict[str, Any]]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_with_keepalive(events), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def openapi_media_type() -> dict[str, Any]:
    """The text/event-stream entry of the OpenAPI document: the schema of one event, whose
    `data` is JSON (OpenAPI 3.1 reads `schema` of an event stream as describing each event)."""
    variants = [
        {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"const": name},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": COMPONENTS.format(model=model.__name__)},
                },
            },
        }
        for name, model in RUN_EVENTS.items()
    ]
    return {"text/event-stream": {"schema": {"oneOf": variants}}}


def openapi_components() -> dict[str, Any]:
    """The event payload schemas, and the schemas they use, for the document's components."""
    components: dict[str, Any] = {}
    for model in RUN_EVENTS.values():
        schema = model.model_json_schema(ref_template=COMPONENTS)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
    return components
