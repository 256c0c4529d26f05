"""Every event a client sees (a run's start, pieces and end; a session's new title), one path.

Publishers: the run engine (`open_stream`, then `RunStream.publish`) and `publish_session`.
Subscribers: `subscribe`, for the chat socket (a session) and SSE (one run), in this process or
any other (see `bridge`).
Chat sockets whose sign-in ended (signed out, deactivated) are told through `accounts.signout`.
"""

from sessions_app.events.hub import (
    drain,
    forget,
    hub,
    open_stream,
    publish_session,
    subscribe,
    warm,
)
from sessions_app.events.stream import TERMINAL_EVENTS, Event, RunStream

__all__ = [
    "TERMINAL_EVENTS",
    "Event",
    "RunStream",
    "drain",
    "forget",
    "hub",
    "open_stream",
    "publish_session",
    "subscribe",
    "warm",
]
