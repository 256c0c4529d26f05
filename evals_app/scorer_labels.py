"""Scorers as people read them: their kind and what their options ask ("Contains “Paris”",
"Judge (rubric: “Is it right…”)"), where a key ("judge:3fa9c1e0") says nothing to a reader.
The key stays the scorer's name for machines (filters, downloads, the API)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evals_app.scorers import REGISTRY, spec_key

QUOTED = 40  # characters of an option's text shown, the rest cut with an ellipsis
RUBRIC_WORDS = 6
DEFAULT_SCALE = [1, 5]


def _quoted(text: Any, length: int = QUOTED) -> str:
    flat = " ".join(str(text).split())
    return f"“{flat if len(flat) <= length else flat[: length - 1] + '…'}”"


def _first_words(text: Any) -> str:
    words = str(text).split()
    shown = " ".join(words[:RUBRIC_WORDS])
    return _quoted(shown + ("…" if len(words) > RUBRIC_WORDS else ""), QUOTED + 1)


def _case(options: dict[str, Any]) -> str:
    return ", case-sensitive" if options.get("case_sensitive") else ""


def _judge(options: dict[str, Any]) -> str:
    scale = options.get("scale")
    shown = ""
    if isinstance(scale, list | tuple) and len(scale) == 2 and list(scale) != DEFAULT_SCALE:
        shown = f" {scale[0]:g}–{scale[1]:g}" if all(_number(v) for v in scale) else ""
    rubric = options.get("rubric")
    said = f"rubric: {_first_words(rubric)}" if rubric else "default rubric"
    return f"Judge{shown} ({said})"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _pairwise(options: dict[str, Any]) -> str:
    rubric = options.get("rubric")
    return f"Pairwise judge (criteria: {_first_words(rubric)})" if rubric else "Pairwise judge"


def _regex(options: dict[str, Any]) -> str:
    ignoring = " (ignoring case)" if "i" in str(options.get("flags", "")) else ""
    return f"Matches {_quoted(options.get('pattern', ''))}{ignoring}"


def _contains(options: dict[str, Any]) -> str:
    text = options.get("text")
    return f"Contains {_quoted(text)}{_case(options)}" if text else "Contains the reference"


def _plain(label: str) -> Any:
    return lambda options: label + _case(options)


DESCRIBED = {
    "exact": _plain("Exact match"),
    "contains": _contains,
    "regex": _regex,
    "json_valid": lambda options: "Valid JSON",
    "json_equal": lambda options: "JSON equal to the reference",
    "similarity": _plain("Similarity to the reference"),
    "judge": _judge,
    "pairwise": _pairwise,
}


def label_of(spec: dict[str, Any] | str) -> str:
    """The scorer a spec describes, in words."""
    spec = {"name": spec} if isinstance(spec, str) else spec
    name = str(spec.get("name"))
    options = {k: v for k, v in spec.items() if k != "name"}
    if name in DESCRIBED:
        return str(DESCRIBED[name](options))
    scorer = REGISTRY.get(name)
    return scorer.label if scorer is not None else name


def labels_of(specs: Iterable[dict[str, Any] | str]) -> dict[str, str]:
    """Each spec's label by its key."""
    return {spec_key(spec): label_of(spec) for spec in specs}


def label_of_key(key: str, known: dict[str, str] | None = None) -> str:
    """A key's label from the specs known (`labels_of`); a key no spec gives any more (its
    options changed since) is named by its kind."""
    if known and key in known:
        return known[key]
    name, _, digest = key.partition(":")
    if not digest:
        return label_of(name)
    scorer = REGISTRY.get(name)
    return f"{scorer.label if scorer is not None else name} (earlier options)"
