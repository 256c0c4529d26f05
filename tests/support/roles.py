"""Staff members with exactly the Django permissions a test needs, given as the admin gives them:
to a user directly, or through a group."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

from sessions_app.models import User

APPS = ("sessions_app", "datasets_app", "evals_app", "budgets_app", "audit_app", "shares_app")


def grant(user: User, *codenames: str) -> User:
    """Give `user` these permissions (codenames of Parley's apps, e.g. "view_session")."""
    permissions = Permission.objects.filter(
        content_type__app_label__in=APPS, codename__in=codenames
    )
    assert permissions.count() == len(set(codenames)), codenames
    user.user_permissions.add(*permissions)
    # The user object remembers the permissions it has looked up; forget them.
    for cache in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        user.__dict__.pop(cache, None)
    return user


def support_group() -> Group:
    """ "Support": may read everything of Parley's apps in the admin, and change nothing."""
    group, _ = Group.objects.get_or_create(name="Support")
    reading = Permission.objects.filter(
        content_type__app_label__in=APPS, codename__startswith="view_"
    )
    group.permissions.set(reading)
    return group


def every_permission() -> list[Permission]:
    return list(Permission.objects.filter(content_type__app_label__in=APPS))
