"""Erasing a person: everything they wrote or that quotes them goes, their account is left as
an anonymous, inactive husk that no one can sign in to, and what they used stays counted
against it (usage rows, deleted runs' records, the daily rollups), so budgets, group totals
and the dashboard stay right.

First the account is closed (no sign-in, token or open socket), so nothing new is made while
it goes. Removed: their sessions (runs, messages, what their model calls were sent), API
tokens, stored sign-ins, share links, budgets, imported identities, refused sign-ins under their
name, the dataset items made of their conversations and the text experiments quoted from those
items, the comments of their blind ratings; and the admin's history stops naming them or
anything of theirs.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.auth import SESSION_KEY
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session as StoredSignIn
from django.db import transaction
from django.db.models import Model, Q

from audit_app.models import Action
from audit_app.record import record
from budgets_app.models import Budget
from datasets_app.models import DatasetItem
from evals_app.models import HumanVerdict, Score, Trial
from privacy_app import retention
from sessions_app.models import (
    ApiToken,
    ImportedIdentity,
    LoginFailure,
    Run,
    Session,
    User,
)
from shares_app.models import ShareLink

ERASED_PREFIX = "erased-"
GONE = "(erased)"  # what the admin's history shows for an erased person's object


def is_erased(user: User) -> bool:
    return user.username.startswith(ERASED_PREFIX) and not user.is_active


def erase(user: User, actor: Any = None) -> Counter[str]:
    """Erase `user`; how many of each thing went. Run again on an erased person, it finds
    nothing left."""
    report: Counter[str] = Counter()
    keys = _keys(user)  # what the admin's history may name, read before it goes
    with transaction.atomic():
        # First nothing new: no sign-in, no token, no socket (deactivating closes them).
        report["API tokens"] = ApiToken.objects.filter(user=user).delete()[0]
        report["signed-in browsers"] = _sign_out(user)
        report["share links"] = ShareLink.objects.filter(owner=user).delete()[0]
        _lock_out(user)
    # Sessions in batches, as the retention purge deletes them: each batch commits.
    purged = retention.purge(Session.objects.filter(user=user), pause=0)
    report.update(sessions=purged.sessions, runs=purged.runs, messages=purged.messages)
    with transaction.atomic():
        report.update(_the_rest(user))
        report["admin history entries"] = _unname_history(keys)
        report["account"] = _anonymise(user)
        record(
            actor,
            Action.ERASURE,
            f"Erased user #{user.pk}",
            subject=user,
            details={k: v for k, v in report.items() if v},
        )
    return report


def _keys(user: User) -> dict[type[Model], list[str]]:
    """The keys of everything of theirs the admin's history may name by its text."""

    def of(objects: Any) -> list[str]:
        return [str(pk) for pk in objects.values_list("pk", flat=True)]

    return {
        User: [str(user.pk)],
        Session: of(Session.objects.filter(user=user)),
        Run: of(Run.objects.filter(user=user)),
        ApiToken: of(ApiToken.objects.filter(user=user)),
        Budget: of(Budget.objects.filter(user=user)),
        DatasetItem: of(DatasetItem.objects.filter(owner=user)),
        ImportedIdentity: of(ImportedIdentity.objects.filter(user=user)),
        LoginFailure: of(LoginFailure.objects.filter(username__iexact=user.username)),
    }


def _sign_out(user: User) -> int:
    """Delete the stored sign-ins (Django's session table) of their browsers."""
    mine = [
        stored.pk
        for stored in StoredSignIn.objects.iterator()
        if str(stored.get_decoded().get(SESSION_KEY)) == str(user.pk)
    ]
    return StoredSignIn.objects.filter(pk__in=mine).delete()[0]


def _lock_out(user: User) -> None:
    user.set_unusable_password()
    user.is_active = False
    user.save(update_fields=["password", "is_active"])


def _the_rest(user: User) -> Counter[str]:
    found: Counter[str] = Counter()
    # Made since the account was closed (a run already under way): the last sweep.
    found["sessions"] = Session.objects.filter(user=user).delete()[1].get("sessions_app.Session", 0)
    found["budgets"] = Budget.objects.filter(user=user).delete()[0]
    found["imported identities"] = ImportedIdentity.objects.filter(user=user).delete()[0]
    failures = LoginFailure.objects.filter(username__iexact=user.username)
    found["refused sign-ins"] = failures.delete()[0]
    items = DatasetItem.objects.filter(owner=user)
    item_ids = list(items.values_list("pk", flat=True))
    trials = Trial.objects.filter(item_uuid__in=item_ids)
    found["experiment answers cleared"] = trials.update(content="", sent_messages=None, error="")
    Score.objects.filter(trial__in=trials).update(judge_prompt=None, reason="", details={})
    found["dataset items"] = DatasetItem.objects.filter(pk__in=item_ids).delete()[0]
    comments = HumanVerdict.objects.filter(rater=user).exclude(comment="")
    found["rating comments"] = comments.update(comment="")
    return found


def _unname_history(keys: dict[type[Model], list[str]]) -> int:
    """The admin's history keeps each change's text as the object was called then: their
    account's name, their sessions' titles, their items' first words, their budgets' and
    tokens' names. Those entries stay, named GONE."""
    types = ContentType.objects.get_for_models(*keys)
    about = Q(pk__in=[])
    for model, pks in keys.items():
        if pks:
            about |= Q(content_type=types[model], object_id__in=pks)
    return LogEntry.objects.filter(about).exclude(object_repr=GONE).update(object_repr=GONE)


def _anonymise(user: User) -> int:
    """The account stays, for what it used to be counted by: its name is drawn at random, its
    details cleared, its password unusable, its rights gone."""
    user.username = f"{ERASED_PREFIX}{secrets.token_hex(8)}"
    user.first_name = user.last_name = user.email = ""
    user.is_staff = user.is_superuser = False
    user.allow_training = False
    user.last_login = None
    user.save()
    user.user_permissions.clear()
    return 1
