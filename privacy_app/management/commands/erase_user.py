"""Erase a person (privacy_app.erasure): asks for confirmation unless --noinput is given, as
Django's flush does; prints what was removed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from privacy_app import erasure
from sessions_app.models import User


class Command(BaseCommand):
    help = "Erase a person: their chats, tokens, share links and dataset items; usage stays."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help="Do not ask for confirmation.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user is called {options['username']!r}.")
        if options["interactive"]:
            answer = input(
                f"This erases {user.get_username()} for good: their chats, tokens, share links "
                "and dataset items. Type 'yes' to go on: "
            )
            if answer != "yes":
                self.stdout.write("Nothing was erased.")
                return
        report = erasure.erase(user)
        self.stdout.write(f"Erased. The account is now {user.get_username()}, inactive.")
        for what, count in report.items():
            self.stdout.write(f"  {what}: {count}")
