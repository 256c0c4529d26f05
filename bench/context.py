"""What every figure needs: the options, the running stack, the fixtures, and where rows go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.report import Row
from bench.servers import Stack
from bench.upstream import model_name

PROMPT = "Tell me something in a few hundred words, please."


@dataclass
class Options:
    quick: bool = False
    only: list[str] = field(default_factory=list)
    clients: int = 100
    db: str = "sqlite"
    redis: bool = False
    capacity_levels: list[int] = field(default_factory=list)
    capacity_transport: str = "ws"
    # Settings of a second Parley to compare with (bench/compare.py), as environment variables.
    against: dict[str, str] = field(default_factory=dict)
    # A commit whose code that second Parley runs, from a worktree and database of its own.
    against_ref: str = ""
    # Daphne processes of fig 1d's `serve --workers N`; 0: one per core.
    workers: int = 0


@dataclass(frozen=True)
class Scenario:
    """One upstream script: how many tokens, how far apart."""

    name: str
    tokens: int
    delay: float

    @property
    def model(self) -> str:
        return model_name(self.tokens, self.delay)

    def timeout(self) -> float:
        """Generous but bounded: three times the upstream's own pace, plus a minute for the
        naive consumer, which writes every token, on a slow machine."""
        return self.tokens * self.delay * 3 + 60.0


@dataclass
class Fixtures:
    """What a Parley's database holds for the load: a user's token and cookie, one agent per
    upstream script, and sessions nobody has run in yet."""

    token: str = ""
    cookie: str = ""
    agents: dict[str, str] = field(default_factory=dict)
    sessions: list[str] = field(default_factory=list)
    _taken: int = 0

    def take(self, n: int) -> list[str]:
        """n sessions nobody has run in yet, so every scenario starts from the same state."""
        if self._taken + n > len(self.sessions):
            raise RuntimeError("the fixtures made too few sessions for this plan")
        chosen = self.sessions[self._taken : self._taken + n]
        self._taken += n
        return chosen

    def agent(self, scenario: Scenario) -> str:
        return self.agents[scenario.model]


@dataclass(kw_only=True)
class Bench(Fixtures):
    opts: Options
    stack: Stack
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)  # results one figure lends another
    # The second Parley's, when it has a database of its own (--against-ref).
    ref: Fixtures | None = None
    # Parley's in its deployed shape, in its PostgreSQL database (fig 1d).
    deployed: Fixtures | None = None

    def fixtures(self, server: str) -> Fixtures:
        """The fixtures in the database of the named server."""
        if server == "parley_b" and self.ref is not None:
            return self.ref
        if server == "deployed" and self.deployed is not None:
            return self.deployed
        return self

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def note(self, text: str) -> None:
        self.notes.append(text)
