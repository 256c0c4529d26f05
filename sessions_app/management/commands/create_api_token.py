from __future__ import annotations

from datetime import date
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions_app import accounts
from sessions_app.models import Agent
from sessions_app.services.agent_names import agent_named


class Command(BaseCommand):
    help = "Create an API token for USERNAME; printed once, as the last line. Only a hash is kept."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="")
        expiry = parser.add_mutually_exclusive_group()
        expiry.add_argument(
            "--expires-in", type=int, metavar="DAYS", help="the token stops working in DAYS days"
        )
        expiry.add_argument(
            "--expires", metavar="YYYY-MM-DD", help="the token works through this date"
        )
        parser.add_argument(
            "--agent",
            action="append",
            default=[],
            dest="agents",
            metavar="NAME_OR_ID",
            help="the token may use only this agent (repeat for more); none: every agent the "
            "user may use",
        )

    def handle(
        self, *args: Any, username: str, name: str, agents: list[str], **options: Any
    ) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        try:
            scope = [agent_named(text) for text in agents]
            token, raw = accounts.create_token(
                user, name, expires_at=_expiry(options), agents=scope
            )
        except ValueError as exc:  # an unknown agent too (UnknownAgent)
            raise CommandError(str(exc)) from exc
        until = (
            f" It works until {accounts.describe_expiry(token.expires_at)}."
            if token.expires_at
            else " It does not expire."
        )
        scope_line = _scope(list(token.agents.order_by("name")))
        self.stdout.write(f"Created token {token.prefix}… for {username}.{until}{scope_line}")
        self.stdout.write("It is shown only once:")
        self.stdout.write(raw)


def _scope(agents: list[Agent]) -> str:
    if not agents:
        return ""
    return " It may use only " + ", ".join(f"“{agent}”" for agent in agents) + "."


def _expiry(options: dict[str, Any]) -> Any:
    if options.get("expires_in") is not None:
        return accounts.expiry_in_days(options["expires_in"])
    if options.get("expires"):
        try:
            day = date.fromisoformat(options["expires"])
        except ValueError as exc:
            raise CommandError(
                f"--expires takes a date as YYYY-MM-DD, not {options['expires']!r}."
            ) from exc
        return accounts.expiry_on(day)
    return None
