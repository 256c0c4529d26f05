"""What the audit log hears without being called: staff reading or exporting someone else's
conversations (sessions_app's signals), and changes to accounts, groups and budgets: added and
changed as the admin records them (Django's LogEntry), deleted as the rows go."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ObjectDoesNotExist
from django.db.models.signals import post_delete, post_save
from django.forms.models import model_to_dict
from django.utils import timezone

from audit_app.models import Action
from audit_app.record import record
from sessions_app.signals import data_exported, transcript_read

# The admin's changes the log keeps, by model label: what they are.
WATCHED = {
    "sessions_app.User": Action.PERMISSION,
    "auth.Group": Action.PERMISSION,
    "budgets_app.Budget": Action.BUDGET,
}
# How long before a deletion the admin's record of it was written, at most.
RECENT = timedelta(minutes=5)
# Free text staff may write on a budget: not copied into the log.
UNCOPIED = {"note"}


def connect() -> None:
    transcript_read.connect(_read, dispatch_uid="audit-transcript-read")
    data_exported.connect(_exported, dispatch_uid="audit-data-exported")
    post_save.connect(_admin_change, sender=LogEntry, dispatch_uid="audit-admin-change")
    for label in WATCHED:
        model = apps.get_model(label)
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"audit-deleted-{label}")


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
    """An addition or change the admin recorded (deletions: see `_deleted`)."""
    model = instance.content_type.model_class() if instance.content_type_id else None
    action = WATCHED.get(model._meta.label) if model is not None else None
    if not created or action is None or instance.action_flag == DELETION:
        return
    verb = "Added" if instance.action_flag == ADDITION else "Changed"
    fields = _changed_fields(instance)
    named = f"{model._meta.verbose_name} #{instance.object_id}"
    summary = f"{verb} {named}" + (f": {', '.join(fields)}" if fields else "")
    details: dict[str, Any] = {"fields": fields, "admin_log_entry": instance.pk}
    subject = None
    if model._meta.label == "sessions_app.User":
        subject = _user_key(instance.object_id)
    elif action == Action.BUDGET:
        details["values"] = _values(instance)
        subject = details["values"].get("user")
    record(instance.user, action, summary, subject=subject, details=details)


def _deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A watched row deleted: by whom the admin's record of it says (one or many at once, which
    the admin writes in bulk, unheard), else by a command or the shell."""
    entry = (
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(sender),
            object_id=str(instance.pk),
            action_flag=DELETION,
            action_time__gte=timezone.now() - RECENT,
        )
        .order_by("-action_time")
        .first()
    )
    action = WATCHED[sender._meta.label]
    # A deleted account cannot be pointed at: its key stays in the details.
    owner = getattr(instance, "user_id", None) if action == Action.BUDGET else None
    record(
        entry.user_id if entry else None,
        action,
        f"Deleted {sender._meta.verbose_name} #{instance.pk}",
        subject=owner,
        details={"id": instance.pk, "through_admin": entry is not None},
    )


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
    """A budget's settings as saved: keys and amounts, not its note."""
    try:
        saved = entry.get_edited_object()
    except ObjectDoesNotExist:
        return {}
    values = model_to_dict(saved)
    return {name: _plain(value) for name, value in values.items() if name not in UNCOPIED}


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, str)) else str(value)


def _user_key(pk: Any) -> int | None:
    """The key of the account an admin entry names, if it still exists."""
    return get_user_model().objects.filter(pk=pk).values_list("pk", flat=True).first()
