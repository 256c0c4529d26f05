"""Sign-ins that end, from Django's signals to the chat sockets (see `signout`).

Signing out closes that browser's sockets (not the user's other browsers). A deactivated or
removed account closes all its sockets; a new password closes those of the user's other
browsers, as Django's `update_session_auth_hash` keeps only the browser that changed it
signed in.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_init, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from sessions_app.accounts import signout
from sessions_app.models import User

# The sign-in tag of the browser whose request is changing a password (see `keeping`).
_keeping: contextvars.ContextVar[str | None] = contextvars.ContextVar("keeping", default=None)
# Only a change to these fields can end a sign-in (each sign-in saves last_login, say).
_SIGN_IN_FIELDS = ("password", "is_active")
# On each User instance: those fields as last loaded or saved, to tell a save that changed them.
_LOADED = "_parley_signin_fields"
_UNREAD = object()  # a field deferred when the user was loaded


@contextlib.contextmanager
def keeping(request: HttpRequest) -> Iterator[None]:
    """Around a view that calls `update_session_auth_hash`: a password changed meanwhile leaves
    this browser's sockets open, since its session stays signed in."""
    tag = signout.tag_of(request.session)
    # A session signed in before tags goes by its key, which is about to rotate: keep the name.
    request.session.setdefault(signout.TAG_KEY, tag)
    token = _keeping.set(tag)
    try:
        yield
    finally:
        _keeping.reset(token)


@receiver(user_logged_in, dispatch_uid="parley-signin-tag")
def _tag_signin(sender: Any, request: HttpRequest | None, user: User, **kwargs: Any) -> None:
    # Kept across a second sign-in of the same user, whose session keeps its data.
    if request is not None and hasattr(request, "session"):
        request.session.setdefault(signout.TAG_KEY, signout.new_tag())


@receiver(user_logged_out, dispatch_uid="parley-signout-sockets")
def _signed_out(sender: Any, request: HttpRequest | None, user: User | None, **kwargs: Any) -> None:
    # Sent before the session is flushed: it still names the sign-in.
    if user is not None and request is not None and hasattr(request, "session"):
        signout.tell(signout.signin_group(signout.tag_of(request.session)))


def _sign_in_fields(user: User) -> dict[str, Any]:
    # The instance's own values: a deferred field is not fetched for this.
    return {name: user.__dict__.get(name, _UNREAD) for name in _SIGN_IN_FIELDS}


@receiver(post_init, sender=User, dispatch_uid="parley-account-loaded")
def _account_loaded(sender: Any, instance: User, **kwargs: Any) -> None:
    setattr(instance, _LOADED, _sign_in_fields(instance))


@receiver(post_save, sender=User, dispatch_uid="parley-account-saved")
def _account_saved(
    sender: Any, instance: User, created: bool, update_fields: Any, **kwargs: Any
) -> None:
    # Every process hears of a save: only when it wrote a new password or active flag.
    written = [f for f in _SIGN_IN_FIELDS if update_fields is None or f in update_fields]
    before, now = getattr(instance, _LOADED, {}), _sign_in_fields(instance)
    changed = [f for f in written if before.get(f, _UNREAD) != now[f]]
    setattr(instance, _LOADED, {**before, **{f: now[f] for f in written}})
    if created or not changed:
        return
    group = signout.user_group(instance.pk)
    message = {
        "active": instance.is_active,
        "auth_hash": instance.get_session_auth_hash(),
        "keep": _keeping.get(),
    }
    # Once committed: a change rolled back ends nothing.
    transaction.on_commit(lambda: signout.tell(group, **message))


@receiver(post_delete, sender=User, dispatch_uid="parley-account-removed")
def _account_removed(sender: Any, instance: User, **kwargs: Any) -> None:
    group = signout.user_group(instance.pk)
    transaction.on_commit(lambda: signout.tell(group, active=False, auth_hash="", keep=None))
