"""One staff action on the record. It names people by their account only (a key, shown as
the account's current name), never by a name or a word of theirs copied into its text, so
erasing a person leaves the record and nothing of them in it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Action(models.TextChoices):
    TRANSCRIPT_READ = "read", "Read another person's transcript"
    EXPORT = "export", "Exported data"
    ERASURE = "erase", "Erased a person"
    PURGE = "purge", "Purged expired sessions"
    BUDGET = "budget", "Changed a budget"
    PERMISSION = "perm", "Changed rights"
    SHARE_REVOKED = "share", "Revoked a share link"
    KEPT = "kept", "Changed whether a session is kept"


class AuditEntry(models.Model):
    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who did it; empty: a command or the server itself.",
    )
    action = models.CharField(max_length=6, choices=Action.choices)
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Whose data or rights it touched.",
    )
    object_type = models.CharField(max_length=60, blank=True)
    object_id = models.CharField(max_length=128, blank=True)
    summary = models.CharField(max_length=300)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["action", "-at"], name="audit_action_time"),
            models.Index(fields=["subject", "-at"], name="audit_subject_time"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.get_action_display()}"
