"""Request bodies larger than DATA_UPLOAD_MAX_MEMORY_SIZE are answered 413 before Django reads
them: Django's ASGI handler copies every body whole before the view starts, and only then would
the size be checked (a 400). A body that announces its length is refused from that; a chunked
one as soon as what has arrived passes the limit.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

ASGIApp = Any


def _announced_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _refusal(scope: dict[str, Any], limit: int) -> tuple[str, bytes]:
    message = f"Request body too large: at most {limit} bytes."
    path = scope.get("path", "")
    if path.startswith("/api/"):
        return "application/json", json.dumps({"detail": message}).encode()
    if path.startswith("/v1/"):  # as OpenAI's API answers errors
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
        return "application/json", json.dumps({"error": error}).encode()
    return "text/plain; charset=utf-8", message.encode()


class BodyLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or limit is None:
            return await self.app(scope, receive, send)
        length = _announced_length(scope)
        if length is not None and length > limit:
            return await self.refuse(scope, send, limit)
        received = 0
        started = False

        async def counted_receive() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Django stops reading at a disconnect and answers nothing; we answer.
                    return {"type": "http.disconnect"}
            return message  # type: ignore[no-any-return]

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted_receive, watched_send)
        if received > limit and not started:
            await self.refuse(scope, send, limit)

    async def refuse(self, scope: dict[str, Any], send: Any, limit: int) -> None:
        content_type, body = _refusal(scope, limit)
        headers = [(b"content-type", content_type.encode()), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
