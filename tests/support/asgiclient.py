"""An HTTP client speaking ASGI to Parley's real application, as daphne does.

Unlike Django's AsyncClient it goes through ASGIHandler itself (its per-request thread context,
its disconnect handling), and a streamed body can be read piece by piece or dropped halfway,
the way a real client leaves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator

from project.asgi import application
from sessions_app.engine import lifespan


@dataclass
class StreamedResponse:
    status_code: int
    headers: dict[str, str]
    communicator: ApplicationCommunicator
    finished: bool = False
    body: bytes = b""
    _buffer: str = field(default="", repr=False)

    async def chunks(self, timeout: float = 10.0) -> AsyncIterator[bytes]:
        while not self.finished:
            message = await self.communicator.receive_output(timeout)
            self.finished = not message.get("more_body", False)
            chunk = message.get("body", b"")
            self.body += chunk
            if chunk:
                yield chunk

    async def lines(self, timeout: float = 10.0) -> AsyncIterator[str]:
        """The body's lines as they arrive, however the chunks were cut."""
        async for chunk in self.chunks(timeout):
            self._buffer += chunk.decode()
            *complete, self._buffer = self._buffer.split("\n")
            for line in complete:
                yield line.removesuffix("\r")
        if self._buffer:
            yield self._buffer
            self._buffer = ""

    async def read(self) -> bytes:
        async for _ in self.chunks():
            pass
        await self.communicator.wait()
        return self.body

    def json(self) -> Any:
        return json.loads(self.body)

    def __getitem__(self, name: str) -> str:
        return self.headers[name.lower()]

    async def disconnect(self) -> None:
        """Leave without reading the rest, as a closed browser tab or killed script does."""
        await self.communicator.send_input({"type": "http.disconnect"})
        await self.communicator.wait(timeout=5)


class ASGIClient:
    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}

    async def open(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> StreamedResponse:
        """Send a request and wait for the status line; the body is read on demand."""
        communicator = await self.send(method, path, body, headers)
        start = await communicator.receive_output(timeout=30)
        assert start["type"] == "http.response.start", start
        response_headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        return StreamedResponse(start["status"], response_headers, communicator)

    async def send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> ApplicationCommunicator:
        """Send a request without waiting for any answer."""
        url = urlsplit(path)
        data = json.dumps(body).encode() if body is not None else b""
        all_headers = {"host": "testserver", **self.headers, **(headers or {})}
        if body is not None:
            all_headers["content-type"] = "application/json"
            all_headers["content-length"] = str(len(data))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method.upper(),
            "scheme": "http",
            "path": url.path,
            "raw_path": url.path.encode(),
            "query_string": url.query.encode(),
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": data})
        return communicator

    async def request(self, method: str, path: str, body: Any = None) -> StreamedResponse:
        response = await self.open(method, path, body)
        await response.read()
        return response

    async def get(self, path: str) -> StreamedResponse:
        return await self.request("GET", path)

    async def post(self, path: str, body: Any = None) -> StreamedResponse:
        return await self.request("POST", path, body if body is not None else {})


def request_served(
    method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> StreamedResponse:
    """From a sync test: one request through the application, on a loop of its own that runs
    the run engine meanwhile, as serve runs it. (Django's test client runs an async view on a
    loop of its own too, where no engine runs: a run asked for there is refused.)"""

    async def send() -> StreamedResponse:
        async with lifespan.serving():
            return await ASGIClient(headers).request(method, path, body)

    return async_to_sync(send)()
