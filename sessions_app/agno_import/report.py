"""What an import did, as the command prints it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sessions_app.agno_import.store import Stored

# Skips listed one by one; those older than --since are only counted.
LISTED = ("team", "workflow", "malformed", "user", "staff", "conflict", "error")
KINDS = {
    "team": "team sessions",
    "workflow": "workflow sessions",
    "since": "not updated since --since",
    "malformed": "malformed",
    "user": "not usable as usernames",
    "staff": "for staff accounts",
    "conflict": "id conflicts",
    "error": "failed to store",
}


@dataclass
class Report:
    layout: str = ""
    table: str = ""
    source: str = ""
    dry_run: bool = False
    read: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    messages: int = 0
    # Agno user id -> (Parley username, how it was found), as first met.
    users: dict[str, tuple[str, str]] = field(default_factory=dict)
    agents_created: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (session_id, kind, why)

    def add(self, stored: Stored) -> None:
        self.outcomes[stored.outcome] += 1
        self.runs += len(stored.runs)
        self.messages += stored.messages
        if stored.placed is not None:
            placed = (stored.placed.user.get_username(), stored.placed.how)
            self.users.setdefault(stored.agno_user, placed)
        if stored.agent_created and stored.agent_created not in self.agents_created:
            self.agents_created.append(stored.agent_created)

    def skip(self, session_id: object, kind: str, reason: str) -> None:
        self.skipped.append((str(session_id or "(no session_id)"), kind, reason))

    def lines(self) -> list[str]:
        verb = "Would import" if self.dry_run else "Imported"
        out = [
            f"Agno {self.layout} table {self.table}: {self.read} sessions read.",
            f"Source (see --source): {self.source}",
            f"{verb} {self.outcomes['imported']} new sessions, "
            f"{self.outcomes['grew']} grown (new runs only), "
            f"{self.outcomes['unchanged']} unchanged: "
            f"{self.runs} runs, {self.messages} messages.",
        ]
        if self.users:
            out.append("Users (Agno user id -> Parley account):")
            out.extend(f"  {agno} -> {name} ({how})" for agno, (name, how) in self.users.items())
        if self.agents_created:
            out.append("Agents created: " + ", ".join(self.agents_created))
        kinds = Counter(kind for _, kind, _ in self.skipped)
        if kinds:
            out.append(
                f"Skipped {len(self.skipped)}: "
                + ", ".join(f"{n} {KINDS.get(kind, kind)}" for kind, n in kinds.items())
            )
        out.extend(
            f"  {session_id}: {reason}"
            for session_id, kind, reason in self.skipped
            if kind in LISTED
        )
        if self.dry_run:
            out.append("Dry run: nothing was written.")
        return out
