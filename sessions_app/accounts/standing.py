"""Whether a signed-in user may still act, as the database says now.

A chat socket is signed in once, when it opens, and may stay open for days: the account can be
deactivated (or removed) meanwhile. What it asks for is checked against the user's current row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions_app.models import User


class Inactive(Exception):
    """The account was deactivated or removed since it signed in."""


@dataclass(frozen=True)
class SignedIn:
    """A user signed in earlier, not checked since: starting a run reads the user's current row
    in the same turn on the database thread as the run's creation (see `active_users`)."""

    pk: Any


def active_users(pks: list[Any]) -> dict[Any, User]:
    """The active users among `pks`, fresh from the database (their staff flags and permissions
    as they are now); one query for them all."""
    return {user.pk: user for user in User.objects.filter(pk__in=set(pks), is_active=True)}


def active_user(pk: Any) -> User:
    """The user, fresh; Inactive when deactivated or removed."""
    user = active_users([pk]).get(pk)
    if user is None:
        raise Inactive
    return user
