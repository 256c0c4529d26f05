"""The chat page's socket as a test reads it: the answers its HTML frames show, and a tab of a
Parley process reached over the network."""

from __future__ import annotations

import asyncio
import html
import json
import re

from websockets.asyncio.client import ClientConnection, connect

from testkit.parley import ParleyProcess


def shown_text(frames: list[str], run_id: str) -> str:
    """A run's answer as the page shows it: what a snapshot showed, then each piece after."""
    text = ""
    shown = re.compile(rf'<span id="run-{run_id}-text" class="stream-text">(.*?)</span>', re.S)
    piece = re.compile(rf'<span hx-swap-oob="beforeend:#run-{run_id}-text">(.*?)</span>', re.S)
    for frame in frames:
        found = shown.search(frame)
        if found:
            text = html.unescape(found.group(1))
        text += "".join(html.unescape(p) for p in piece.findall(frame))
    return text


class ChatTab:
    """A chat page's socket, from outside the server, and the frames it was sent."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.frames: list[str] = []

    @classmethod
    async def open(cls, parley: ParleyProcess, cookie: str) -> ChatTab:
        headers = {"Origin": parley.base_url, "Cookie": cookie}
        socket = await connect(parley.url("/ws/chat/", scheme="ws"), additional_headers=headers)
        return cls(socket)

    async def send(self, **frame: str) -> None:
        await self.socket.send(json.dumps(frame))

    async def until(self, needle: str | re.Pattern[str], timeout: float = 30.0) -> str:
        """Receive frames until one contains `needle` (or a match of it); that frame."""
        async with asyncio.timeout(timeout):
            while True:
                frame = str(await self.socket.recv())
                self.frames.append(frame)
                if needle.search(frame) if isinstance(needle, re.Pattern) else needle in frame:
                    return frame

    def text_of(self, run_id: str) -> str:
        return shown_text(self.frames, run_id)
