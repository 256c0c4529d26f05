"""People: accounts, the identities an import remembers, API tokens, refused sign-ins."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from sessions_app.usernames import AccountUsernameValidator


class User(AbstractUser):
    # Django's field with ':' allowed, which sign-up refuses: see usernames.py.
    username_validator = AccountUsernameValidator()
    username = models.CharField(
        _("username"),
        max_length=150,
        unique=True,
        help_text=_("Required. 150 characters or fewer. Letters, digits and @/./+/-/_ only."),
        validators=[username_validator],
        error_messages={"unique": _("A user with that username already exists.")},
    )
    allow_training = models.BooleanField(
        default=True,
        help_text="Whether this user's conversations may be exported to train models.",
    )


class ImportedIdentity(models.Model):
    """The account a user of an imported database has here, so each later import of the same
    `source` finds it again, whatever the account is called by then (sessions_app/agno_import)."""

    source = models.CharField(max_length=255, help_text="The database imported from.")
    external_user_id = models.CharField(max_length=150, help_text="The user's id there.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_user_id"], name="imported_identity_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.external_user_id} of {self.source}"


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to tell it.")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="From this moment the token answers 401; empty: never."
    )
    # The agents the token may use. `scoped` keeps a token limited when all its agents are
    # deleted since: an empty `agents` alone would read as "every agent".
    agents = models.ManyToManyField(
        "sessions_app.Agent",
        blank=True,
        related_name="+",
        help_text="The agents it may use; none: every agent its user may use.",
    )
    scoped = models.BooleanField(
        default=False, help_text="Limited to its agents (to none, once they are all deleted)."
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name or 'token'} ({self.prefix}…)"

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class LoginFailure(models.Model):
    """A refused sign-in; the login throttle counts these by username and by client address."""

    username = models.CharField(max_length=150)
    address = models.CharField(max_length=45, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["username", "created_at"], name="loginfailure_user_time"),
            models.Index(fields=["address", "created_at"], name="loginfailure_address_time"),
        ]

    def __str__(self) -> str:
        return f"failed sign-in as {self.username!r} from {self.address or '?'}"
