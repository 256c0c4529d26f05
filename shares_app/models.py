"""A share link: a token (only its hash is stored) to a snapshot of one session, as it was
when the link was made or last updated."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ShareLink(models.Model):
    link_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Deleting the session (its owner, the retention purge, an erasure) takes its links.
    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=8, editable=False, help_text="To tell links apart.")
    # What the page shows: the session's title, agent and runs as they were (see snapshot).
    snapshot = models.JSONField(editable=False)
    snapshot_at = models.DateTimeField(default=timezone.now)
    show_owner = models.BooleanField(default=False, help_text="Show the owner's name.")
    show_tools = models.BooleanField(
        default=False, help_text="Show the tools the agent used and what they returned."
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One live link a session: "update" takes a new snapshot, "new link" replaces it.
            models.UniqueConstraint(
                fields=["session"], condition=Q(revoked_at=None), name="share_one_live_link"
            )
        ]

    def __str__(self) -> str:
        return f"share link {self.prefix}…"

    def live(self, now: datetime | None = None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    @property
    def title(self) -> str:
        return str(self.snapshot.get("title", ""))
