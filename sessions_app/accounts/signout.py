"""Chat sockets whose sign-in ended, told in every process: the browser signed out, the account
was deactivated or removed, or its password changed (in another browser).

An open socket listens as a `SignIn` under two group names: its sign-in's, from a tag kept in
the Django session (which, unlike the session key, survives the key's rotation when the password
changes), and its user's. `tell` reaches every socket under a name: in this process at once, in
the others through the channel layer, whose groups their `bridge` joined for their sockets.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions_app.events.bridge import crosses_processes
from sessions_app.events.hub import hub
from sessions_app.process import WORKER_ID

log = logging.getLogger("parley.realtime")

TAG_KEY = "parley_signin"  # in the Django session: the sign-in's tag

# Why a socket's sign-in ended.
SIGNED_OUT = "signed-out"
DEACTIVATED = "deactivated"
PASSWORD_CHANGED = "password-changed"


def new_tag() -> str:
    return secrets.token_hex(16)


def tag_of(session: Any) -> str:
    """The sign-in's tag; a session signed in before there were tags goes by its key."""
    return session.get(TAG_KEY) or f"key:{session.session_key}"


def signin_group(tag: str) -> str:
    # Group names allow fewer characters, and fewer of them, than a tag or a user's key.
    return "signin." + uuid.uuid5(uuid.NAMESPACE_URL, f"parley:signin:{tag}").hex


def user_group(user_pk: Any) -> str:
    return "user." + uuid.uuid5(uuid.NAMESPACE_URL, f"parley:user:{user_pk}").hex


class SignIn:
    """One socket's sign-in. When it ends, `on_end(reason)` is called on the socket's loop."""

    def __init__(self, session: Any, user: Any, on_end: Callable[[str], None]) -> None:
        self.tag = tag_of(session)
        self.groups = (signin_group(self.tag), user_group(user.pk))
        self.joined: list[str] = []  # the groups this process joined for it
        # What the user's sessions carry while the password stays the same.
        self.auth_hash = user.get_session_auth_hash()
        self.on_end = on_end
        self.loop = asyncio.get_running_loop()

    def hear(self, message: dict[str, Any]) -> None:
        reason = self._ended_by(message)
        if reason is not None:
            self.on_end(reason)

    def _ended_by(self, message: dict[str, Any]) -> str | None:
        if message["group"] == self.groups[0]:
            return SIGNED_OUT
        if not message["active"]:
            return DEACTIVATED
        if message["auth_hash"] != self.auth_hash:
            if message.get("keep") == self.tag:
                # The browser that changed the password: Django keeps it signed in.
                self.auth_hash = message["auth_hash"]
                return None
            return PASSWORD_CHANGED
        return None


_lock = threading.Lock()  # `tell` runs in whatever thread saved the user
_listening: dict[str, set[SignIn]] = {}


async def listen(session: Any, user: Any, on_end: Callable[[str], None]) -> SignIn:
    """Once this returns, the end of this sign-in, told anywhere, reaches `on_end`."""
    signin = SignIn(session, user, on_end)
    with _lock:
        for group in signin.groups:
            _listening.setdefault(group, set()).add(signin)
    if not crosses_processes():
        return signin
    try:
        for group in signin.groups:
            await hub.bridge.join_group(group)
            signin.joined.append(group)
    except Exception:
        # This process still tells its own sockets, and runs are refused by the check per ask.
        log.exception("a socket's sign-in cannot be told from other processes")
    except BaseException:
        forget(signin)
        raise
    return signin


def forget(signin: SignIn) -> None:
    with _lock:
        for group in signin.groups:
            listeners = _listening.get(group, set())
            listeners.discard(signin)
            if not listeners:
                _listening.pop(group, None)
    for group in signin.joined:
        hub.bridge.leave_group(group)
    signin.joined = []


def tell(group: str, **message: Any) -> None:
    """Tell the sockets under `group`, in this process and every other. For synchronous code (a
    signal's receiver); a failed send to other processes is logged, not raised."""
    message["group"] = group
    _hear(message)
    if not crosses_processes():
        return
    try:
        layer = get_channel_layer()
        async_to_sync(layer.group_send)(group, {**message, "type": "signout", "origin": WORKER_ID})
    except Exception:
        log.exception("could not tell other processes that a sign-in ended")


def _hear(message: dict[str, Any]) -> None:
    with _lock:
        listeners = tuple(_listening.get(message["group"], ()))
    for signin in listeners:
        try:
            signin.loop.call_soon_threadsafe(signin.hear, message)
        except RuntimeError:
            pass  # its loop has ended, and the socket with it


def _from_elsewhere(message: dict[str, Any]) -> None:
    if message.get("origin") != WORKER_ID:  # this process told its own already
        _hear(message)


hub.bridge.handlers["signout"] = _from_elsewhere
