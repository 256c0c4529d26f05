"""Which Parley account an Agno user's sessions go to.

Never one that merely bears the same name: anyone could have signed up as `alice@example.com`
before the import. An Agno user goes to the account an operator named for them (`--map-user`),
else to the account an earlier import of the same source made or was told to use for them
(remembered in ImportedIdentity), else to a new inactive account named `agno:` + their id, a
name sign-up refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from sessions_app.agno_import.parse import Skip
from sessions_app.agno_import.user_map import MappingError
from sessions_app.models import ImportedIdentity, User

DEFAULT_PREFIX = "agno:"
MAPPED, EARLIER, NEW = "mapped", "earlier import", "new account, inactive"


@dataclass(frozen=True)
class UserMapping:
    """The operator's choices: the prefix of new accounts' names, the accounts named for Agno
    ids (Agno user id -> username), and whether staff accounts may receive sessions."""

    prefix: str = DEFAULT_PREFIX
    allow_staff: bool = False
    explicit: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Placed:
    user: User
    how: str  # MAPPED, EARLIER or NEW


def username_problem(username: str) -> str | None:
    """Why `username` cannot be a Parley username (the User model's own rules), else None."""
    users = get_user_model()
    try:
        users._meta.get_field(users.USERNAME_FIELD).run_validators(username)
    except ValidationError as exc:
        return " ".join(exc.messages)
    return None


def named_accounts(mapping: UserMapping) -> dict[str, User]:
    """The accounts the operator named, by Agno id; MappingError for a name no account has, or
    a staff account without allow_staff."""
    wanted = set(mapping.explicit.values())
    found = {u.get_username(): u for u in get_user_model().objects.filter(username__in=wanted)}
    if missing := sorted(wanted - set(found)):
        raise MappingError("No Parley account named " + ", ".join(map(repr, missing)) + ".")
    for agno_id, username in mapping.explicit.items():
        if _is_staff(found[username]) and not mapping.allow_staff:
            raise MappingError(
                f"{username!r} is a staff account: add --allow-staff-users to give it the "
                f"sessions of Agno user {agno_id!r}."
            )
    return {agno_id: found[username] for agno_id, username in mapping.explicit.items()}


class Directory:
    """Finds (and makes, and remembers) the account of each Agno user of one source. Called
    inside a session's transaction: what it makes is undone with a session that is."""

    def __init__(self, source: str, mapping: UserMapping, named: dict[str, User]) -> None:
        self.source = source
        self.mapping = mapping
        self.named = named

    def place(self, agno_id: str) -> Placed:
        if agno_id in self.named:
            placed = Placed(self.named[agno_id], MAPPED)
            # Remembered, so the next import without the option keeps to the operator's choice.
            ImportedIdentity.objects.update_or_create(
                source=self.source, external_user_id=agno_id, defaults={"user": placed.user}
            )
            return placed
        known = ImportedIdentity.objects.select_related("user").filter(
            source=self.source, external_user_id=agno_id
        )
        if (identity := known.first()) is not None:
            if _is_staff(identity.user) and not self.mapping.allow_staff:
                raise Skip(
                    f"Agno user {agno_id!r} has the staff account {identity.user.get_username()!r}"
                    " since an earlier import (see --allow-staff-users)",
                    "staff",
                )
            return Placed(identity.user, EARLIER)
        user = self._new_account(agno_id)
        ImportedIdentity.objects.create(source=self.source, external_user_id=agno_id, user=user)
        return Placed(user, NEW)

    def _new_account(self, agno_id: str) -> User:
        wanted = self.mapping.prefix + agno_id
        if problem := username_problem(wanted):
            raise Skip(f"{wanted!r} cannot be a username: {problem} (see --map-user)", "user")
        # Someone known only to Agno: an account that cannot sign in until staff activate it.
        user = get_user_model()(username=_free_username(wanted), is_active=False)
        user.set_unusable_password()
        user.save()
        return user


def _free_username(wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`…: the first no account has in any case (as sign-up
    compares them), cut to fit the field."""
    users = get_user_model()
    limit = users._meta.get_field(users.USERNAME_FIELD).max_length
    candidate, n = wanted, 1
    while users.objects.filter(username__iexact=candidate).exists():
        n += 1
        suffix = f"-{n}"
        candidate = wanted[: limit - len(suffix)] + suffix
    return candidate


def _is_staff(user: User) -> bool:
    return user.is_staff or user.is_superuser
