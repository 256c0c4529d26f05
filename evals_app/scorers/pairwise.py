"""A pairwise judge: is the candidate's answer better than the baseline's to the same item?

Models favour a position (often the first answer shown), so the judge is asked twice, the
baseline's answer first and then the candidate's, and only a choice that survives the swap
counts: the candidate preferred both times is a win (1.0), the baseline both times a loss (0.0),
anything else (ties, or the orders disagreeing) a tie (0.5).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from evals_app.judging import JudgeError, ask_judge
from evals_app.scorers.base import Case, Scorer, SpecError, Verdict, register
from evals_app.scorers.prompting import json_objects, labelled, section, transcript

DEFAULT_CRITERIA = "Which answer serves the user better: correct, complete, relevant and clear."
SCHEMA = {
    "type": "object",
    "properties": {"winner": {"enum": ["A", "B", "tie"]}, "reason": {"type": "string"}},
    "required": ["winner", "reason"],
}
ORDERS = (("baseline", "candidate"), ("candidate", "baseline"))  # who is shown as A, then B
VALUES = {"candidate": 1.0, "baseline": 0.0}
_CHOICE = re.compile(r"^\W*(A|B|tie)\b", re.IGNORECASE)


@register
class Pairwise(Scorer):
    name = "pairwise"
    label = "Pairwise judge"
    pairwise = True
    needs_judge = True

    def __init__(self, spec: dict[str, Any], judge: Any = None) -> None:
        super().__init__(spec, judge)
        criteria = self.options.get("rubric", DEFAULT_CRITERIA)
        if not isinstance(criteria, str) or not criteria.strip():
            raise SpecError("pairwise: 'rubric' must be a non-empty text.")
        self.criteria = criteria.strip()

    async def score(self, case: Case) -> Verdict:
        if not case.baseline_answer:
            return Verdict.failed("There is no baseline answer to compare with.")
        prompts, orders, tokens, costs, version_id = [], [], 0, [], None
        for first, second in ORDERS:
            shown = {first: "A", second: "B"}
            prompt = self.prompt(case, _answer(case, first), _answer(case, second))
            prompts.append(prompt)
            try:
                text, spent, cost, version_id = await ask_judge(self.judge, prompt, SCHEMA)
            except JudgeError as exc:
                return _failed(exc.message, orders, prompts, tokens, costs, version_id)
            tokens += spent
            costs.append(cost)
            choice, reason = read_choice(text)
            winner = next((side for side, mark in shown.items() if mark == choice), "tie")
            orders.append(
                {"first": first, "choice": choice, "winner": winner, "reason": reason, "raw": text}
            )
            if choice is None:
                error = f"The judge's verdict could not be read ({first}'s answer shown first)."
                return _failed(error, orders, prompts, tokens, costs, version_id)
        return _combined(orders, prompts, tokens, costs, version_id)

    def prompt(self, case: Case, first: str, second: str) -> list[dict[str, str]]:
        system = (
            "You compare two answers to the same conversation and say which is better.\n\n"
            f"Criteria: {self.criteria}\n\n"
            "The order the answers are shown in says nothing about them. Reply with JSON "
            'only, in this form: {"winner": "A" or "B" or "tie", '
            '"reason": "<one or two sentences>"}'
        )
        parts = [section("Conversation", transcript(case.conversation))]
        if case.reference:
            parts.append(section("Reference answer", case.reference))
        parts += [section("Answer A", first), section("Answer B", second)]
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": "\n\n".join(parts)},
        ]


def _answer(case: Case, side: str) -> str:
    return (case.baseline_answer if side == "baseline" else case.answer) or ""


def read_choice(text: str) -> tuple[str | None, str]:
    """("A" | "B" | "tie" | None, reason) from JSON anywhere, a "Winner: A" line, or a bare A."""
    for found in json_objects(text):
        for key in ("winner", "better", "choice"):
            if key in found:
                return _choice(str(found[key])), str(found.get("reason") or "").strip()
    said = labelled(text, "winner", "better", "choice", "verdict")
    reason = labelled(text, "reason", "reasoning", "explanation") or ""
    return _choice(said if said is not None else text), reason


def _choice(text: str) -> str | None:
    """A, B or tie from "A", "Answer B", "tie", "B."; None when it says none of them."""
    cleaned = re.sub(r"^\W*answer\s+", "", text.strip(), flags=re.IGNORECASE)
    match = _CHOICE.match(cleaned)
    if not match:
        return None
    choice = match.group(1)
    return "tie" if choice.lower() == "tie" else choice.upper()


def _combined(
    orders: list[dict[str, Any]],
    prompts: list[Any],
    tokens: int,
    costs: list[Decimal | None],
    version_id: Any,
) -> Verdict:
    winners = {order["winner"] for order in orders}
    winner = next(iter(winners)) if len(winners) == 1 else "tie"
    value = VALUES.get(winner, 0.5)
    if len(winners) > 1:
        reason = "The two orders disagreed, so it counts as a tie."
    elif winner == "tie":
        reason = "The judge called it a tie."
    else:
        reason = f"The {winner}'s answer was preferred in both orders."
    return Verdict(
        value,
        reason=reason,
        details={"orders": orders},
        judge_version_id=version_id,
        judge_prompt=prompts,
        tokens=tokens,
        cost=_total(costs),
    )


def _failed(
    error: str,
    orders: list[dict[str, Any]],
    prompts: list[Any],
    tokens: int,
    costs: list[Decimal | None],
    version_id: Any,
) -> Verdict:
    return Verdict.failed(
        error,
        details={"orders": orders},
        judge_version_id=version_id,
        judge_prompt=prompts,
        tokens=tokens,
        cost=_total(costs),
    )


def _total(costs: list[Decimal | None]) -> Decimal | None:
    known = [cost for cost in costs if cost is not None]
    return sum(known, Decimal(0)) if known else None
