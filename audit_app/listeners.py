"""What the audit log hears without being called: staff reading someone else's transcript
(sessions_app's transcript_read signal), and the admin's own record of changes to accounts,
groups and budgets (Django's LogEntry, as the admin writes it)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist
from django.db.models.signals import post_save
from django.forms.models import model_to_dict

from audit_app.models import Action
from audit_app.record import record
from sessions_app.signals import data_exported, transcript_read

# The admin's changes the log keeps, by model label: what they are.
WATCHED = {
    "sessions_app.User": Action.PERMISSION,
    "auth.Group": Action.PERMISSION,
    "budgets_app.Budget": Action.BUDGET,
}
_VERB = {ADDITION: "Added", DELETION: "Deleted"}


def connect() -> None:
    transcript_read.connect(_read, dispatch_uid="audit-transcript-read")
    data_exported.connect(_exported, dispatch_uid="audit-data-exported")
    post_save.connect(_admin_change, sender=LogEntry, dispatch_uid="audit-admin-change")


def _read(sender: Any, reader: Any, owner_id: Any, obj: Any, **kwargs: Any) -> None:
    name = sender._meta.verbose_name
    record(
        reader,
        Action.TRANSCRIPT_READ,
        f"Opened {name} {obj.pk}",
        subject=owner_id,
        obj=obj,
    )


def _exported(sender: Any, reader: Any, count: int, owner_ids: list[Any], **kwargs: Any) -> None:
    name = sender._meta.verbose_name_plural
    subject = owner_ids[0] if len(owner_ids) == 1 else None
    record(
        reader,
        Action.EXPORT,
        f"Exported {count} {name} as JSON",
        subject=subject,
        details={"owner_ids": owner_ids},
    )


def _admin_change(sender: Any, instance: LogEntry, created: bool, **kwargs: Any) -> None:
    model = instance.content_type.model_class() if instance.content_type_id else None
    action = WATCHED.get(model._meta.label) if model is not None else None
    if not created or action is None:
        return
    verb = _VERB.get(instance.action_flag, "Changed")
    fields = _changed_fields(instance)
    named = f"{model._meta.verbose_name} #{instance.object_id}"
    summary = f"{verb} {named}" + (f": {', '.join(fields)}" if fields else "")
    is_user = model._meta.label == "sessions_app.User"
    subject = _user_key(instance.object_id) if is_user else None
    details = {"fields": fields, "admin_log_entry": instance.pk}
    if action == Action.BUDGET and instance.action_flag != DELETION:
        details["values"] = _values(instance)
    record(instance.user, action, summary, subject=subject, details=details)


def _changed_fields(entry: LogEntry) -> list[str]:
    """The field names the admin's change message lists (names only, never values)."""
    try:
        parts = json.loads(entry.change_message or "[]")
    except ValueError:
        return []
    return [
        str(field)
        for part in parts
        if isinstance(part, dict)
        for change in part.values()
        if isinstance(change, dict)
        for field in change.get("fields", [])
    ]


def _values(entry: LogEntry) -> dict[str, Any]:
    """A budget's settings as saved (no person's words are in them: keys and amounts)."""
    try:
        saved = entry.get_edited_object()
    except ObjectDoesNotExist:
        return {}
    return {name: _plain(value) for name, value in model_to_dict(saved).items()}


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, str)) else str(value)


def _user_key(pk: Any) -> int | None:
    """The key of the account an admin entry names, if it still exists."""
    return get_user_model().objects.filter(pk=pk).values_list("pk", flat=True).first()
