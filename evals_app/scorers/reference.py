"""Scorers that compare an answer with the item's reference answer, or check its form: no model
is asked, so they are exact, free and instant. Each gives 1.0 or 0.0, similarity a ratio."""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from typing import Any

from evals_app.scorers.base import Case, Scorer, SpecError, Verdict, register


def _normalized(text: str, spec: dict[str, Any]) -> str:
    """Whitespace runs as one space, ends trimmed; lower case unless "case_sensitive"."""
    text = " ".join(text.split())
    return text if spec.get("case_sensitive") else text.lower()


def _passed(ok: bool, reason: str) -> Verdict:
    return Verdict(1.0 if ok else 0.0, reason=reason)


class _AgainstReference(Scorer):
    needs_reference = True

    async def score(self, case: Case) -> Verdict:
        if not case.reference:
            return Verdict.failed("The item has no reference answer.")
        return self.compare(case.answer, case.reference)

    def compare(self, answer: str, reference: str) -> Verdict:
        raise NotImplementedError


@register
class Exact(_AgainstReference):
    name = "exact"
    label = "Exact match"

    def compare(self, answer: str, reference: str) -> Verdict:
        ok = _normalized(answer, self.options) == _normalized(reference, self.options)
        return _passed(ok, "Same as the reference." if ok else "Differs from the reference.")


@register
class Contains(_AgainstReference):
    """The reference within the answer, or, with "text", that text."""

    name = "contains"
    label = "Contains"

    def __init__(self, spec: dict[str, Any], judge: Any = None) -> None:
        super().__init__(spec, judge)
        text = self.options.get("text")
        if text is not None and (not isinstance(text, str) or not text):
            raise SpecError("contains: 'text' must be a non-empty string.")
        self.needs_reference = text is None

    async def score(self, case: Case) -> Verdict:
        wanted = self.options.get("text") or case.reference
        if not wanted:
            return Verdict.failed("The item has no reference answer.")
        return self.compare(case.answer, wanted)

    def compare(self, answer: str, reference: str) -> Verdict:
        ok = _normalized(reference, self.options) in _normalized(answer, self.options)
        return _passed(ok, "Found in the answer." if ok else "Not found in the answer.")


@register
class Regex(Scorer):
    """The answer matches "pattern" (searched, not anchored; "flags": "i" ignores case)."""

    name = "regex"
    label = "Regular expression"

    def __init__(self, spec: dict[str, Any], judge: Any = None) -> None:
        super().__init__(spec, judge)
        pattern = self.options.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise SpecError("regex: give a 'pattern'.")
        flags = re.IGNORECASE if "i" in str(self.options.get("flags", "")) else 0
        try:
            self.pattern = re.compile(pattern, flags | re.DOTALL)
        except re.error as exc:
            raise SpecError(f"regex: the pattern does not compile: {exc}.") from exc

    async def score(self, case: Case) -> Verdict:
        found = self.pattern.search(case.answer)
        if found:
            return _passed(True, f"Matched {found.group(0)[:80]!r}.")
        return _passed(False, "No match.")


def _json_of(text: str) -> Any:
    """The answer's JSON: all of it, or the inside of one ```json fence."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, re.DOTALL)
    return json.loads(fenced.group(1) if fenced else stripped)


@register
class JsonValid(Scorer):
    name = "json_valid"
    label = "Valid JSON"

    async def score(self, case: Case) -> Verdict:
        try:
            _json_of(case.answer)
        except ValueError as exc:
            return _passed(False, f"Not JSON: {exc}.")
        return _passed(True, "Valid JSON.")


@register
class JsonEqual(_AgainstReference):
    """The same JSON value as the reference (key order and spacing aside)."""

    name = "json_equal"
    label = "JSON equal"

    def compare(self, answer: str, reference: str) -> Verdict:
        try:
            expected = _json_of(reference)
        except ValueError as exc:
            return Verdict.failed(f"The reference is not JSON: {exc}.")
        try:
            given = _json_of(answer)
        except ValueError as exc:
            return _passed(False, f"The answer is not JSON: {exc}.")
        ok = given == expected
        return _passed(ok, "Same JSON value." if ok else "A different JSON value.")


@register
class Similarity(_AgainstReference):
    """How much of the two texts match, 0 to 1: difflib's ratio over their words, so a reworded
    answer scores by the words it shares in order with the reference."""

    name = "similarity"
    label = "Similarity"

    def compare(self, answer: str, reference: str) -> Verdict:
        a = _normalized(answer, self.options).split()
        b = _normalized(reference, self.options).split()
        ratio = SequenceMatcher(None, a, b, autojunk=False).ratio() if (a or b) else 1.0
        return Verdict(round(ratio, 4), reason=f"{ratio:.0%} of the words match in order.")
