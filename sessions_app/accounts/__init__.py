"""Accounts: who may act (active accounts, sign-ins that end and close their sockets), API
tokens (stored hashed, expiring), the login throttle, and the pages around them: sign-in,
sign-up, a user's settings, their tokens.

This module is the one entrance: the rest of Parley imports what it names and nothing deeper.
Its tables are sessions_app's models (`models/accounts.py`); the rules for usernames, which those
models use, are `sessions_app/usernames.py`.
"""

from __future__ import annotations

from sessions_app.accounts import auth_urls, signins, signout, token_urls
from sessions_app.accounts.login_throttle import ThrottledLogin
from sessions_app.accounts.sections import Section as SettingsSection
from sessions_app.accounts.sections import add_settings_section
from sessions_app.accounts.settings_views import account_settings
from sessions_app.accounts.standing import Inactive, SignedIn, active_user, active_users
from sessions_app.accounts.tokens import (
    PREFIX,
    TokenClaim,
    TokenExpired,
    Unauthorized,
    create_token,
    describe_expiry,
    expiry_in_days,
    expiry_on,
    user_for_token,
    users_for_tokens,
)

__all__ = [
    "PREFIX",
    "Inactive",
    "SettingsSection",
    "SignedIn",
    "ThrottledLogin",
    "TokenClaim",
    "TokenExpired",
    "Unauthorized",
    "account_settings",
    "active_user",
    "active_users",
    "add_settings_section",
    "auth_urls",
    "create_token",
    "describe_expiry",
    "expiry_in_days",
    "expiry_on",
    "signins",
    "signout",
    "token_urls",
    "user_for_token",
    "users_for_tokens",
]
