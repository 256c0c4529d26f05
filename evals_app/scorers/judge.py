"""An LLM judge with a rubric: the judge agent reads the conversation, the reference answer when
there is one, and the answer, and gives a score on the rubric's scale with its reason.

Its prompt and version are kept with the score, so a verdict can be read and questioned later.
A verdict that cannot be read, or is off the scale, is an error with the judge's words in its
details: nothing is guessed.
"""

from __future__ import annotations

import math
import re
from typing import Any

from evals_app.judging import JudgeError, ask_judge
from evals_app.scorers.base import Case, Scorer, SpecError, Verdict, register
from evals_app.scorers.prompting import json_objects, labelled, section, transcript

DEFAULT_RUBRIC = (
    "How well the answer serves the user: correct, complete, relevant to what was asked, and clear."
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@register
class Judge(Scorer):
    name = "judge"
    label = "LLM judge"
    needs_judge = True
    scale = (1.0, 5.0)  # unless its spec gives another

    def __init__(self, spec: dict[str, Any], judge: Any = None) -> None:
        super().__init__(spec, judge)
        rubric = self.options.get("rubric", DEFAULT_RUBRIC)
        if not isinstance(rubric, str) or not rubric.strip():
            raise SpecError("judge: 'rubric' must be a non-empty text.")
        self.rubric = rubric.strip()
        self.scale = _scale(self.options.get("scale", [1, 5]))

    async def score(self, case: Case) -> Verdict:
        prompt = self.prompt(case)
        try:
            text, tokens, cost, version_id = await ask_judge(self.judge, prompt, self.schema())
        except JudgeError as exc:
            return Verdict.failed(exc.message, judge_prompt=prompt)
        spent = {"judge_prompt": prompt, "judge_version_id": version_id, "tokens": tokens}
        value, reason = read_verdict(text)
        low, high = self.scale
        if value is None:
            error = "The judge's verdict could not be read: no score in it."
            return Verdict.failed(error, details={"raw": text}, cost=cost, **spent)
        if not low <= value <= high:
            error = f"The judge gave {value:g}, outside the scale {low:g} to {high:g}."
            return Verdict.failed(error, details={"raw": text}, cost=cost, **spent)
        return Verdict(value, reason=reason, details={"raw": text}, cost=cost, **spent)

    def schema(self) -> dict[str, Any]:
        low, high = self.scale
        score: dict[str, Any] = {"type": "number", "minimum": low, "maximum": high}
        if float(low).is_integer() and float(high).is_integer() and high - low <= 100:
            # llama.cpp's grammars leave a number's bounds out, but keep an enum: a scale of
            # whole numbers is given as its values, so the embedded judge cannot leave it.
            score = {"enum": list(range(int(low), int(high) + 1))}
        properties = {"score": score, "reason": {"type": "string"}}
        return {"type": "object", "properties": properties, "required": ["score", "reason"]}

    def prompt(self, case: Case) -> list[dict[str, str]]:
        low, high = self.scale
        system = (
            "You are an impartial judge of an assistant's answer in a conversation.\n\n"
            f"Rubric: {self.rubric}\n\n"
            f"Score the answer from {low:g} (worst) to {high:g} (best). Reply with JSON only, "
            f'in this form: {{"score": <a number from {low:g} to {high:g}>, '
            '"reason": "<one or two sentences>"}'
        )
        parts = [section("Conversation", transcript(case.conversation))]
        if case.reference:
            parts.append(section("Reference answer", case.reference))
        parts.append(section("Answer to judge", case.answer))
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": "\n\n".join(parts)},
        ]


def _scale(value: Any) -> tuple[float, float]:
    ok = isinstance(value, list | tuple) and len(value) == 2
    if ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        low, high = float(value[0]), float(value[1])
        if math.isfinite(low) and math.isfinite(high) and low < high:
            return low, high
    raise SpecError("judge: 'scale' must be [lowest, highest], two numbers, lowest first.")


def read_verdict(text: str) -> tuple[float | None, str]:
    """(score, reason) from a JSON object anywhere in the text, else from a "Score: n" line."""
    for found in json_objects(text):
        if "score" in found:
            return _number(found["score"]), str(found.get("reason") or "").strip()
    score = labelled(text, "score", "rating")
    reason = labelled(text, "reason", "reasoning", "explanation") or ""
    return (_number(score) if score is not None else None), reason


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    match = _NUMBER.search(str(value))
    return float(match.group(0)) if match else None
