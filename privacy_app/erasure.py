"""Erasing a person: everything they wrote or that quotes them goes, their account is left as
an anonymous, inactive husk that no one can sign in to, and what they used stays counted
against it (usage rows, deleted runs' records, the daily rollups), so budgets, group totals
and the dashboard stay right.

Removed: their sessions (runs, messages, what their model calls were sent), API tokens, share
links, budgets, imported identities, refused sign-ins under their name, the dataset items made
of their conversations and the text experiments quoted from those items, the comments of their
blind ratings; and the admin's history stops naming them or their conversations.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import Q

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
    sessions = list(Session.objects.filter(user=user).values_list("pk", flat=True))
    runs = list(Run.objects.filter(user=user).values_list("pk", flat=True))
    # Before the sessions, whose deletion would take them uncounted.
    report["share links"] = ShareLink.objects.filter(owner=user).delete()[0]
    # Sessions in batches, as the retention purge deletes them: each batch commits.
    purged = retention.purge(Session.objects.filter(user=user), pause=0)
    report.update(sessions=purged.sessions, runs=purged.runs, messages=purged.messages)
    with transaction.atomic():
        report.update(_the_rest(user))
        report["admin history entries"] = _unname_history(user, sessions, runs, report)
        report["account"] = _anonymise(user)
        record(
            actor,
            Action.ERASURE,
            f"Erased user #{user.pk}",
            subject=user,
            details={k: v for k, v in report.items() if v},
        )
    return report


def _the_rest(user: User) -> Counter[str]:
    found: Counter[str] = Counter()
    found["API tokens"] = ApiToken.objects.filter(user=user).delete()[0]
    found["budgets"] = Budget.objects.filter(user=user).delete()[0]
    found["imported identities"] = ImportedIdentity.objects.filter(user=user).delete()[0]
    found["refused sign-ins"] = LoginFailure.objects.filter(username=user.username).delete()[0]
    items = DatasetItem.objects.filter(owner=user)
    item_ids = list(items.values_list("pk", flat=True))
    trials = Trial.objects.filter(item_uuid__in=item_ids)
    found["experiment answers cleared"] = trials.update(content="", sent_messages=None, error="")
    Score.objects.filter(trial__in=trials).update(judge_prompt=None, reason="", details={})
    found["dataset items"] = DatasetItem.objects.filter(pk__in=item_ids).delete()[0]
    comments = HumanVerdict.objects.filter(rater=user).exclude(comment="")
    found["rating comments"] = comments.update(comment="")
    return found


def _unname_history(user: User, sessions: list[Any], runs: list[Any], report: Counter) -> int:
    """The admin's history keeps each change's text as the object was called then: their
    account's name, their sessions' titles. Those entries stay, named GONE."""
    types = ContentType.objects.get_for_models(User, Session, Run, DatasetItem)
    about = (
        Q(content_type=types[User], object_id=str(user.pk))
        | Q(content_type=types[Session], object_id__in=[str(pk) for pk in sessions])
        | Q(content_type=types[Run], object_id__in=[str(pk) for pk in runs])
    )
    return LogEntry.objects.filter(about).exclude(object_repr=GONE).update(object_repr=GONE)


def _anonymise(user: User) -> int:
    """The account stays, for what it used to be counted by: its name is drawn at random, its
    details cleared, its password unusable, its rights gone."""
    user.username = f"{ERASED_PREFIX}{secrets.token_hex(8)}"
    user.first_name = user.last_name = user.email = ""
    user.set_unusable_password()
    user.is_active = user.is_staff = user.is_superuser = False
    user.allow_training = False
    user.last_login = None
    user.save()
    user.user_permissions.clear()
    return 1
