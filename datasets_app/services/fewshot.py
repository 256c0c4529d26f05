"""Few-shot examples: an agent's dataset fed back to it as example turns before the history.

Examples are sent with `name` "example_user" / "example_assistant" (OpenAI's convention for
example turns), so the model and staff can tell them from the conversation, and a snapshot of a
run leaves them out.

They are other people's words shown to everyone who chats with the agent: only items a person
accepted, never those of owners who opted out of training use, and redacted as an export is
(e-mail addresses, phone numbers, keys).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from django.db.models import F

from datasets_app.export.redact import Redactor
from datasets_app.models import DatasetItem, ItemSource, ItemStatus
from datasets_app.services import feeds
from datasets_app.services.snapshot import conversation
from sessions_app.models import Agent, FewShotOrder, Role
from sessions_app.services.examples import Examples


class DatasetExamples:
    """The chat app's few-shot source (sessions_app.services.examples.ExampleSource), set by
    this app's AppConfig.ready: what the engine sends and what the agents service refuses."""

    def examples_for(self, agents: Iterable[Agent]) -> dict[Any, Examples]:
        return examples_for(agents)

    def check_dataset(self, dataset_id: Any) -> None:
        feeds.check_agent_dataset(dataset_id)


def examples_for(agents: Iterable[Agent]) -> dict[Any, Examples]:
    """Each few-shot agent's examples, by agent pk; an agent without any is left out."""
    found: dict[Any, Examples] = {}
    for agent in {a.pk: a for a in agents}.values():
        if agent.fewshot_dataset_id is None or not agent.fewshot_count:
            continue
        items = _chosen(agent)
        if items:
            found[agent.pk] = Examples(
                [str(item.item_id) for item in items],
                [turn for item in items for turn in example_turns(item)],
            )
    return found


def _chosen(agent: Agent) -> list[DatasetItem]:
    order: list[Any] = ["-created_at", "item_id"]
    if agent.fewshot_order == FewShotOrder.BEST:
        order = [F("rating").desc(nulls_last=True), *order]
    # Items of owners who opted out of training use are not shown to anyone's agent either;
    # nor are those a rule accepted: `reviewed_at` is set only when a person gave the status.
    items = DatasetItem.objects.trainable().filter(
        dataset_id=agent.fewshot_dataset_id,
        status=ItemStatus.ACCEPTED,
        reviewed_at__isnull=False,
        source__in=[ItemSource.RUN, ItemSource.SESSION, ItemSource.EXPERIMENT],
    )
    fields = ("item_id", "source", "messages", "corrected_answer", "content_hash")
    chosen = items.order_by(*order).only(*fields)
    return list(chosen[: agent.fewshot_count])


def example_turns(item: DatasetItem) -> list[dict[str, Any]]:
    """The item's user and answer turns (no system message, no tool rounds), oldest first,
    redacted. A run item gives its own question and answer only: the history it was asked in
    belongs to someone else's conversation and was not what was reviewed."""
    key = (item.item_id, item.content_hash)
    cached = _redacted.get(key)
    if cached is None:
        cached = [{**turn, "content": Redactor()(turn["content"])} for turn in _shown(item)]
        _redacted.put(key, cached)
    return [dict(turn) for turn in cached]


def _shown(item: DatasetItem) -> list[dict[str, Any]]:
    """The turns sent, as said: redacting costs milliseconds a message, so only these are."""
    turns: list[dict[str, Any]] = []
    for message in conversation(item.messages, item.corrected_answer):
        text = message.get("content") or ""
        if message["role"] == Role.USER:
            turns.append({"role": "user", "name": "example_user", "content": text})
        elif message["role"] == Role.ASSISTANT and not message.get("tool_calls") and text:
            turns.append({"role": "assistant", "name": "example_assistant", "content": text})
    if item.source in (ItemSource.RUN, ItemSource.EXPERIMENT):
        last_question = max((i for i, t in enumerate(turns) if t["role"] == "user"), default=0)
        turns = turns[last_question:]
    return turns


class _Redacted:
    """Redacted examples of this process, by (item, content hash), least recently used out
    first once they hold more than `limit` characters. The hash changes with the text (a
    correction too), so a changed item is redacted afresh. Starts share one database thread,
    but other threads may ask too, hence the lock."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self.turns: OrderedDict[tuple[Any, str], list[dict[str, Any]]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[Any, str]) -> list[dict[str, Any]] | None:
        with self.lock:
            if key in self.turns:
                self.turns.move_to_end(key)
            return self.turns.get(key)

    def put(self, key: tuple[Any, str], turns: list[dict[str, Any]]) -> None:
        with self.lock:
            if key in self.turns:
                return
            self.turns[key] = turns
            self.size += _size(turns)
            while self.size > self.limit and len(self.turns) > 1:
                _, dropped = self.turns.popitem(last=False)
                self.size -= _size(dropped)


def _size(turns: list[dict[str, Any]]) -> int:
    return sum(len(turn["content"]) for turn in turns)


# A few megabytes: a start sends at most 20 examples an agent, and run items are two turns.
_redacted = _Redacted(limit=4_000_000)
