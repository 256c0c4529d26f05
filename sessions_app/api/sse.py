"""Server-sent events: a run's events as `event: <type>` / `data: <json>` messages."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse

from sessions_app.api.schemas.events import RUN_EVENTS
from sessions_app.engine import RunHandle

# A comment line this often while the model is silent, so proxies keep the connection open.
KEEPALIVE_SECONDS = 15.0
COMPONENTS = "#/components/schemas/{model}"


def format_event(event: dict[str, Any]) -> str:
    data = {key: value for key, value in event.items() if key != "event"}
    return f"event: {event['event']}\ndata: {json.dumps(data, cls=DjangoJSONEncoder)}\n\n"


async def _frames(handle: RunHandle) -> AsyncIterator[str]:
    # A closed client stops this generator (the run itself goes on); None means a silence.
    async for event in handle.events(idle=KEEPALIVE_SECONDS):
        yield ": keep-alive\n\n" if event is None else format_event(event)


def event_stream(handle: RunHandle) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_frames(handle), content_type="text/event-stream")
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
