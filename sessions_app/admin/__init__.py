"""Staff's console: every table of Parley in the Django admin, read like the chat, fast at size.

Importing the modules registers their ModelAdmins, the admin's sign-in form and its name.
"""

from __future__ import annotations

from sessions_app.admin import agents, calls, login, runs, sessions, site, users

__all__ = ["agents", "calls", "login", "runs", "sessions", "site", "users"]
