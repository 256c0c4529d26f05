"""A chat tab in the same process: the ASGI application's WebSocket, signed in as a user."""

from __future__ import annotations

import asyncio
import json

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from project.asgi import application
from tests.support.chatsocket import shown_text


async def cookie_for(user) -> bytes:
    client = Client()
    await sync_to_async(client.force_login)(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


class Tab:
    """One browser tab's socket, and everything it was sent."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.ws = communicator
        self.frames: list[str] = []

    async def send(self, **frame) -> None:
        await self.ws.send_to(text_data=json.dumps(frame))

    async def until(self, needle: str, timeout: float = 10.0) -> str:
        """Receive frames until one contains `needle`; returns that frame."""
        for frame in self.frames:
            if needle in frame:
                return frame
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            assert remaining > 0, f"never received {needle!r}; got {self.frames[-3:]}"
            frame = await self.ws.receive_from(timeout=remaining)
            self.frames.append(frame)
            if needle in frame:
                return frame

    def text_of(self, run_id: str) -> str:
        """The answer as this tab would show it: snapshot plus every streamed piece after it."""
        return shown_text(self.frames, run_id)

    async def close(self) -> None:
        await self.ws.disconnect()


async def open_tab(user, origin: bytes = b"http://testserver") -> Tab:
    headers = [(b"origin", origin)]
    if user is not None:
        headers.append((b"cookie", await cookie_for(user)))
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return Tab(communicator)
