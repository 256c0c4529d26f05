"""Writing the audit log: one call per staff action, from wherever the action happens."""

from __future__ import annotations

from typing import Any

from django.db import models

from audit_app.models import Action, AuditEntry


def record(
    actor: Any,
    action: Action,
    summary: str,
    *,
    subject: Any = None,
    obj: models.Model | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    """Write one entry. `actor`: the staff member (a user, or None for a command run without
    one); `subject`: the person whose data or rights it touched (a user or their key);
    `summary` and `details` name things by id, never quote a person's words or names."""
    return AuditEntry.objects.create(
        actor_id=_person(actor),
        action=action,
        subject_id=_person(subject),
        object_type=obj._meta.label if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        summary=summary[:300],
        details=details or {},
    )


def _person(user: Any) -> Any:
    """A user's key: None for no one (or an anonymous user)."""
    if user is None or isinstance(user, int):
        return user
    return user.pk if getattr(user, "is_authenticated", False) else None
