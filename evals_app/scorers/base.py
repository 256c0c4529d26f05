"""What every scorer is: a small class that takes one answer in its case and gives a Verdict.

A scorer is built from a spec, {"name": …, and its options}; its `key` (the name, and a digest
of the options when there are any) names its scores, so changing a scorer's options scores again
under a new key while the old scores stay readable.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from sessions_app.models import Agent


class SpecError(ValueError):
    """A scorer spec that cannot be used: unknown name, missing or bad option."""


@dataclass
class Case:
    """One answer to judge, with what it answered."""

    conversation: list[dict[str, Any]]  # the turns before the answer, system message left out
    answer: str
    reference: str | None = None  # the item's corrected answer, else its original
    baseline_answer: str | None = None  # for the pairwise judge: the baseline's, same item


@dataclass
class Verdict:
    value: float | None
    reason: str = ""
    error: str = ""  # why there is no value: the scorer failed, nothing was dropped
    details: dict[str, Any] = field(default_factory=dict)
    judge_version_id: Any = None
    judge_prompt: Any = None
    tokens: int = 0
    cost: Decimal | None = None

    @classmethod
    def failed(cls, error: str, **kwargs: Any) -> Verdict:
        return cls(None, error=error, **kwargs)


class Scorer:
    name: ClassVar[str]
    label: ClassVar[str]
    needs_reference: ClassVar[bool] = False
    pairwise: ClassVar[bool] = False  # judges a candidate against the baseline
    needs_judge: ClassVar[bool] = False
    # The range of its values, for charts and "higher is better".
    scale: tuple[float, float] = (0.0, 1.0)

    def __init__(self, spec: dict[str, Any], judge: Agent | None = None) -> None:
        self.spec = spec
        self.options = {k: v for k, v in spec.items() if k != "name"}
        self.judge = judge
        if self.needs_judge and judge is None:
            raise SpecError(f"The {self.name} scorer needs a judge agent.")

    @property
    def key(self) -> str:
        return spec_key(self.spec)

    async def score(self, case: Case) -> Verdict:
        raise NotImplementedError


def spec_key(spec: dict[str, Any] | str) -> str:
    """The key of a spec's scores: its name, and a digest of its options when it has any. Any
    spec has one, also one that builds no scorer (its error is stored under it)."""
    if not isinstance(spec, dict):
        return str(spec)[:100]
    name = str(spec.get("name"))[:90]
    options = {k: v for k, v in spec.items() if k != "name"}
    if not options:
        return name
    text = json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)
    return f"{name}:{hashlib.sha256(text.encode()).hexdigest()[:8]}"


REGISTRY: dict[str, type[Scorer]] = {}


def register(cls: type[Scorer]) -> type[Scorer]:
    REGISTRY[cls.name] = cls
    return cls


def build(spec: dict[str, Any] | str, judge: Agent | None = None) -> Scorer:
    """The scorer a spec names ("contains" alone is {"name": "contains"})."""
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict) or spec.get("name") not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        raise SpecError(f"Unknown scorer {spec!r}; the scorers are: {known}.")
    return REGISTRY[spec["name"]](spec, judge)
