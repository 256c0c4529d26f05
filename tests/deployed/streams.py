"""Clients of the deployed shape: an SSE run read on a thread of its own, and waiting for what
other processes do."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.apiclient import parse_sse


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll `condition` until it is truthy; its value. The bound only turns a hang into a
    failure that says what never came."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)
    return value


class StreamedRun:
    """POST /api/runs with "stream": true to one server, its events read as they arrive."""

    def __init__(self, base_url: str, headers: dict[str, str], **payload: Any) -> None:
        self.base_url, self.headers = base_url, headers
        self.payload = {**payload, "stream": True}
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.status: int | None = None
        self.response_headers: httpx.Headers | None = None
        self.error: Exception | None = None  # the connection broke (its server was killed)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            with (
                httpx.Client(base_url=self.base_url, headers=self.headers, timeout=60) as client,
                client.stream("POST", "/api/runs", json=self.payload) as response,
            ):
                self.status, self.response_headers = response.status_code, response.headers
                block: list[str] = []
                for line in response.iter_lines():
                    block.append(line)
                    if line == "":
                        self.events += parse_sse(block)
                        block = []
        except httpx.HTTPError as exc:
            self.error = exc

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def content(self) -> str:
        return "".join(data["content"] for kind, data in self.events if kind == "RunContent")

    @property
    def run_id(self) -> str:
        started = wait_until(lambda: self.events, "RunStarted")
        return started[0][1]["run_id"]

    @property
    def session_id(self) -> str:
        started = wait_until(lambda: self.events, "RunStarted")
        return started[0][1]["session_id"]

    def wait_for(self, count: int, kind: str = "RunContent") -> None:
        wait_until(lambda: self.kinds().count(kind) >= count, f"{count} {kind} event(s)")

    def join(self, timeout: float = 60.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the stream did not end; got {self.kinds()[-3:]}"
