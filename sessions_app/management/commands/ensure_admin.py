from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Make sure the `admin` superuser exists (password from PARLEY_ADMIN_PASSWORD)."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects
        password = os.getenv("PARLEY_ADMIN_PASSWORD", "")
        admin = users.filter(username="admin").first()
        if admin is not None:
            if password and not admin.check_password(password):
                admin.set_password(password)
                admin.save(update_fields=["password"])
                self.stdout.write("Updated the admin password from PARLEY_ADMIN_PASSWORD.")
            return
        generated = not password
        password = password or secrets.token_urlsafe(12)
        users.create_superuser("admin", "", password)
        if generated:
            self.stdout.write(f"Created the admin account: username admin, password {password}")
        else:
            self.stdout.write("Created the admin account (password from PARLEY_ADMIN_PASSWORD).")
