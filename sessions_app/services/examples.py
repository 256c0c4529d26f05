"""Few-shot examples, as the engine and the agents service ask for them: one small interface
that another app fills (datasets, in its AppConfig.ready), so this app never names it.

With no source set, no agent is given examples, and naming a dataset for an agent is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessions_app.models import Agent


@dataclass
class Examples:
    """What one run is given: the items' ids (kept on the run) and their turns, as sent."""

    item_ids: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)


class ExampleSource(Protocol):
    def examples_for(self, agents: Iterable[Agent]) -> dict[Any, Examples]:
        """Each agent's examples, by agent pk; an agent given none may be left out. Called on
        the database thread as runs start: it costs the start its queries."""
        ...

    def check_dataset(self, dataset_id: Any) -> None:
        """Refuse a dataset an agent is about to take examples from (never None: no examples
        is always allowed): access.NotFound when it does not exist, or an error of the source's
        own, which the source's API error handler answers."""
        ...


_source: ExampleSource | None = None


def set_example_source(source: ExampleSource | None) -> None:
    global _source
    _source = source


def examples_for(agents: Iterable[Agent]) -> dict[Any, Examples]:
    return {} if _source is None else _source.examples_for(agents)


def check_dataset(dataset_id: Any) -> None:
    if dataset_id is None:
        return
    if _source is None:
        raise ValueError("fewshot_dataset_id cannot be set: no app gives few-shot examples.")
    _source.check_dataset(dataset_id)
