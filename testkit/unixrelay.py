"""A loopback TCP port in front of a unix socket, so that a browser or an HTTP client can reach
one worker of `serve --workers N` (which listen on unix sockets only) by a URL of its own."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path


class UnixRelay:
    """Every connection to `url` is passed, both ways, to a new connection to `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)
        assert self._server is not None, "the relay did not start"
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", 0)
        )
        started.set()
        self._loop.run_forever()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            inner_reader, inner_writer = await asyncio.open_unix_connection(str(self.path))
        except OSError:  # the worker is down: as a refused connection would be
            writer.close()
            return
        await asyncio.gather(_pipe(reader, inner_writer), _pipe(inner_reader, writer))

    def close(self) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()
