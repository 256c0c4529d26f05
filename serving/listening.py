"""Where daphne listens: one endpoint string, used by `manage.py serve`, the deployment example
and the benchmark alike; for the workers of `serve --workers N`, a unix socket.

Daphne's `--bind`/`--port` listen with Twisted's default queue of 50 pending connections. A
burst of new clients larger than that, arriving while the event loop is busy, overflows it: the
kernel drops the extra connection attempts, and each client's TCP stack tries again only a second
later. Servers commonly queue 2048 (gunicorn, uvicorn); the kernel caps it at
`net.core.somaxconn`.
"""

from __future__ import annotations

LISTEN_BACKLOG = 2048


def daphne_endpoint(host: str, port: int, backlog: int = LISTEN_BACKLOG) -> str:
    """A Twisted endpoint description for daphne's `--endpoint`; an IPv6 host's colons are
    escaped, as the description's own separators are colons."""
    interface = host.strip("[]").replace(":", r"\:")
    return f"tcp:port={port}:interface={interface}:backlog={backlog}"


def daphne_unix_endpoint(path: str, backlog: int = LISTEN_BACKLOG) -> str:
    """A unix socket at `path` (any stale one left by a process that died is removed first).
    Readable and writable by all: the directory it is in decides who reaches it."""
    return f"unix:address={path}:mode=666:lockfile=0:backlog={backlog}"


def daphne_socket_limits(max_message_bytes: int) -> list[str]:
    """daphne's options that close a socket sent a longer message (or frame), as it arrives."""
    size = str(max_message_bytes)
    return ["--websocket-max-message-size", size, "--websocket-max-frame-size", size]
