"""Staff rights: the one question every door (API, chat pages, chat socket, admin views of our
own) asks before staff act on what is not theirs.

It is the question Django's admin asks: an active staff member (AdminSite.has_permission) who
holds the model's permission (ModelAdmin.has_*_permission); superusers hold every permission.
As in the admin, the right to change a model includes the right to view it.
"""

from __future__ import annotations

from typing import Any, Literal

from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import Model

SCOPE = "agent_scope"  # the attribute of a user object that carries its token's agents

Action = Literal["view", "add", "change", "delete"]


def is_staff(user: Any) -> bool:
    """Someone the admin would let in: the only people a permission can speak for."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_staff", False))


def _holds(user: Any, action: str, model: type[Model]) -> bool:
    opts = model._meta
    return bool(user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}"))


def staff_may(user: Any, action: Action, model: type[Model]) -> bool:
    """Whether `user` may `action` any `model` object, anyone's, as staff."""
    if not is_staff(user):
        return False
    return _holds(user, action, model) or (action == "view" and _holds(user, "change", model))


def missing(action: Action, model: type[Model]) -> PermissionDenied:
    """The refusal for a staff member without the right: it names the permission to ask for."""
    return PermissionDenied(f"You need the “{action} {model._meta.verbose_name}” permission.")


def require(user: Any, action: Action, model: type[Model]) -> None:
    """For things only staff do at all (agents, datasets): PermissionDenied naming the right.
    The staff features of the other apps (datasets, experiments) read every agent's
    conversations, so a token limited to some agents is refused there."""
    if not staff_may(user, action, model):
        raise missing(action, model)
    if model._meta.app_label != "sessions_app" and getattr(user, SCOPE, None) is not None:
        raise PermissionDenied(LIMITED_TOKEN)


LIMITED_TOKEN = (
    "This token is limited to some agents; datasets and experiments need a token that is not."
)
