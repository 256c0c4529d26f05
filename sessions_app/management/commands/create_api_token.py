from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions_app.services.tokens import create_token


class Command(BaseCommand):
    help = "Create an API token for USERNAME; printed once, as the last line. Only a hash is kept."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        token, raw = create_token(user, name)
        self.stdout.write(f"Created token {token.prefix}… for {username}. It is shown only once:")
        self.stdout.write(raw)
