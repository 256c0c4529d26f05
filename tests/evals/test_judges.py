"""The scorers that ask a model, against the scripted upstream: the judge with a rubric and the
pairwise judge asked in both orders; what they send, how they read verdicts, and the errors
they give when the judge cannot be asked or cannot be understood."""

from __future__ import annotations

import json
import socket
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from evals_app.judging import JudgeError, ask_judge
from evals_app.scorers import Case, build
from evals_app.scorers.judge import read_verdict
from evals_app.scorers.pairwise import read_choice
from testkit.upstream import Reply
from tests.evals import rows

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = [
    {"role": "user", "content": "Hi, I have a geography question."},
    {"role": "assistant", "content": "Go ahead."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture
def judge(upstream):
    return rows.judge_agent()


def verdict_json(score, reason: str = "Right, and brief.") -> Reply:
    return Reply(json.dumps({"score": score, "reason": reason}))


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


async def judged(judge, answer: str, reference: str | None = "Paris", **options):
    scorer = build({"name": "judge", **options}, judge)
    return await scorer.score(Case(CONVERSATION, answer, reference))


# -- the judge with a rubric ------------------------------------------------------------------


async def test_the_judge_gives_its_score_and_reason_and_its_prompt_and_version_are_kept(
    judge, upstream
):
    upstream.script(verdict_json(4))

    verdict = await judged(judge, "Paris.", rubric="Is the answer correct?")

    assert (verdict.value, verdict.reason, verdict.error) == (4.0, "Right, and brief.", "")
    assert verdict.judge_version_id == judge.live_version_id
    (request,) = upstream.requests
    assert verdict.judge_prompt == request["messages"]
    system, user = request["messages"]
    assert "Is the answer correct?" in system["content"]
    assert "from 1 (worst) to 5 (best)" in system["content"] and '"score"' in system["content"]
    assert "User: What is the capital of France?" in user["content"]
    assert "## Reference answer\nParis" in user["content"]
    assert user["content"].endswith("## Answer to judge\nParis.")


async def test_without_a_reference_the_prompt_has_none(judge, upstream):
    upstream.script(verdict_json(3))
    await judged(judge, "Paris.", reference=None)
    assert "Reference answer" not in upstream.requests[0]["messages"][1]["content"]


async def test_the_judge_is_asked_its_models_at_temperature_zero_unless_it_sets_one(
    judge, upstream
):
    await judged(judge, "Paris.")
    judge.temperature, judge.max_tokens = 0.3, 64
    await sync_to_async(judge.save)()
    await judged(judge, "Paris.")

    first, second = upstream.requests
    assert first["model"] == "judge-model" and first["temperature"] == 0
    assert "seed" not in first and "max_tokens" not in first and "response_format" not in first
    assert (second["temperature"], second["max_tokens"]) == (0.3, 64)


async def test_the_embedded_model_judges_with_a_fixed_seed_held_to_the_verdicts_schema(
    judge, upstream, settings
):
    settings.LLM_EMBEDDED = True
    await judged(judge, "Paris.")
    sent = upstream.requests[0]
    assert sent["seed"] == 0 and sent["temperature"] == 0
    schema = sent["response_format"]["schema"]
    assert schema["required"] == ["score", "reason"]
    # A scale of whole numbers is held as its values: llama.cpp's grammar keeps an enum, not
    # a number's bounds.
    assert schema["properties"]["score"] == {"enum": [1, 2, 3, 4, 5]}


async def test_the_live_version_judges_not_a_draft(judge, upstream):
    live = judge.live_version_id
    await sync_to_async(rows.draft)(judge, model="draft-model")
    _, _, _, version_id = await ask_judge(judge, [{"role": "user", "content": "Hi"}])
    assert upstream.requests[0]["model"] == "judge-model" and version_id == live

    judge.model = "better-judge"
    await sync_to_async(judge.save)()
    fresh = await sync_to_async(type(judge).objects.get)(pk=judge.pk)
    *_, version_id = await ask_judge(fresh, [{"role": "user", "content": "Hi"}])
    assert upstream.requests[1]["model"] == "better-judge"
    assert version_id == fresh.live_version_id != live


async def test_the_judges_tokens_are_counted_and_priced_as_runs_are(judge, upstream, settings):
    settings.LLM_PRICES = "judge-model=1.00:2.00"
    upstream.script(Reply('{"score": 5, "reason": "ok"}', prompt_tokens=300, completion_tokens=20))
    verdict = await judged(judge, "Paris.")
    assert verdict.tokens == 320
    assert verdict.cost == Decimal("0.000340")  # (300 * 1 + 20 * 2) / 1,000,000


async def test_a_judge_without_a_known_price_costs_nothing_known(judge, upstream):
    upstream.script(verdict_json(5))
    verdict = await judged(judge, "Paris.")
    assert verdict.cost is None and verdict.tokens > 0


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        ('{"score": 3, "reason": "Partly right."}', 3.0, "Partly right."),
        ('Sure. {"score": 2.5, "reason": "Vague."} Anything else?', 2.5, "Vague."),
        ('```json\n{"reason": "Fine.", "score": "4"}\n```', 4.0, "Fine."),
        ('{"note": "first"} then {"score": 1, "reason": "Wrong."}', 1.0, "Wrong."),
        ("Score: 2\nReason: Too long.", 2.0, "Too long."),
        ("**Score:** 4/5\n**Reason:** Clear.", 4.0, "Clear."),
        ("I liked it.", None, ""),
        ('{"score": "excellent"}', None, ""),
    ],
)
def test_verdicts_are_read_from_json_anywhere_or_a_score_line(text, score, reason):
    assert read_verdict(text) == (score, reason)


async def test_an_unreadable_verdict_is_an_error_with_the_judges_words(judge, upstream):
    upstream.script(Reply("I think the answer is pretty good overall."))
    verdict = await judged(judge, "Paris.")
    assert verdict.value is None
    assert verdict.error == "The judge's verdict could not be read: no score in it."
    assert verdict.details == {"raw": "I think the answer is pretty good overall."}
    assert verdict.tokens > 0 and verdict.judge_prompt == upstream.requests[0]["messages"]


async def test_a_score_off_the_scale_is_an_error(judge, upstream):
    upstream.script(verdict_json(9), verdict_json(9))
    off = await judged(judge, "Paris.")
    assert off.value is None and off.error == "The judge gave 9, outside the scale 1 to 5."
    assert json.loads(off.details["raw"])["score"] == 9
    on = await judged(judge, "Paris.", scale=[0, 10])
    assert on.value == 9.0
    assert "from 0 (worst) to 10 (best)" in upstream.requests[1]["messages"][0]["content"]


async def test_an_unreachable_judge_gives_an_error_score(judge, settings):
    settings.LLM_BASE_URL = closed_port_url()
    verdict = await judged(judge, "Paris.")
    assert verdict.value is None
    assert verdict.error.startswith("The judge Judge could not be asked:")
    assert "could not be reached" in verdict.error
    with pytest.raises(JudgeError):
        await ask_judge(judge, [{"role": "user", "content": "Hi"}])


async def test_a_judge_answering_an_http_error_gives_an_error_score(judge, upstream):
    upstream.script(Reply(status=401, error_message="Incorrect API key provided"))
    verdict = await judged(judge, "Paris.")
    assert verdict.value is None
    assert "401" in verdict.error and "Incorrect API key provided" in verdict.error


# -- the pairwise judge -----------------------------------------------------------------------


def shown(request: dict, label: str) -> str:
    text = request["messages"][1]["content"]
    after = text.split(f"## Answer {label}\n", 1)[1]
    return after.split("\n\n## Answer", 1)[0]


def prefers(word: str):
    """A judge that picks the answer containing `word`, wherever it is shown."""

    def reply(body: dict) -> Reply:
        winner = "A" if word in shown(body, "A") else "B"
        return Reply(json.dumps({"winner": winner, "reason": f"{winner} says {word}."}))

    return reply


async def compared(judge, candidate: str, baseline: str | None):
    scorer = build("pairwise", judge)
    return await scorer.score(Case(CONVERSATION, candidate, "Paris", baseline))


async def test_pairwise_asks_in_both_orders_baseline_first(judge, upstream):
    upstream.script(prefers("Paris"), prefers("Paris"))
    await compared(judge, "It is Paris.", "It is Lyon.")
    first, second = upstream.requests
    assert (shown(first, "A"), shown(first, "B")) == ("It is Lyon.", "It is Paris.")
    assert (shown(second, "A"), shown(second, "B")) == ("It is Paris.", "It is Lyon.")


async def test_a_candidate_preferred_in_both_orders_wins(judge, upstream):
    upstream.script(prefers("Paris"), prefers("Paris"))
    verdict = await compared(judge, "It is Paris.", "It is Lyon.")
    assert verdict.value == 1.0
    assert verdict.reason == "The candidate's answer was preferred in both orders."
    orders = verdict.details["orders"]
    assert [(o["first"], o["choice"], o["winner"]) for o in orders] == [
        ("baseline", "B", "candidate"),
        ("candidate", "A", "candidate"),
    ]
    assert [o["reason"] for o in orders] == ["B says Paris.", "A says Paris."]
    assert verdict.judge_prompt == [r["messages"] for r in upstream.requests]
    assert verdict.judge_version_id == judge.live_version_id


async def test_a_baseline_preferred_in_both_orders_is_a_loss(judge, upstream):
    upstream.script(prefers("Lyon"), prefers("Lyon"))
    verdict = await compared(judge, "It is Paris.", "It is Lyon.")
    assert verdict.value == 0.0
    assert verdict.reason == "The baseline's answer was preferred in both orders."


async def test_a_judge_that_always_picks_the_first_answer_gives_a_tie(judge, upstream):
    upstream.script(Reply('{"winner": "A", "reason": "First."}'), Reply("A"))
    verdict = await compared(judge, "It is Paris.", "It is Lyon.")
    assert verdict.value == 0.5
    assert verdict.reason == "The two orders disagreed, so it counts as a tie."
    assert [o["winner"] for o in verdict.details["orders"]] == ["baseline", "candidate"]


async def test_a_tie_in_both_orders_is_a_tie(judge, upstream):
    upstream.script(Reply('{"winner": "tie", "reason": "Same."}'), Reply("Winner: tie"))
    verdict = await compared(judge, "Paris.", "Paris!")
    assert verdict.value == 0.5 and verdict.reason == "The judge called it a tie."


async def test_pairwise_sums_tokens_and_cost_over_both_calls(judge, upstream, settings):
    settings.LLM_PRICES = "judge-model=1.00:1.00"
    upstream.script(
        Reply('{"winner": "B"}', prompt_tokens=100, completion_tokens=10),
        Reply('{"winner": "A"}', prompt_tokens=100, completion_tokens=10),
    )
    verdict = await compared(judge, "It is Paris.", "It is Lyon.")
    assert verdict.value == 1.0
    assert verdict.tokens == 220 and verdict.cost == Decimal("0.000220")


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ('{"winner": "B", "reason": "More exact."}', "B"),
        ('Verdict follows. {"better": "Answer A"}', "A"),
        ("Winner: tie\nReason: Same facts.", "tie"),
        ("B. It names the city.", "B"),
        ("Both are fine.", None),
    ],
)
def test_pairwise_choices_are_read_from_json_a_line_or_a_bare_letter(text, choice):
    assert read_choice(text)[0] == choice


async def test_an_unreadable_second_verdict_is_an_error_keeping_the_first(judge, upstream):
    upstream.script(Reply('{"winner": "B", "reason": "Exact."}'), Reply("Hard to say."))
    verdict = await compared(judge, "It is Paris.", "It is Lyon.")
    assert verdict.value is None
    assert (
        verdict.error == "The judge's verdict could not be read (candidate's answer shown first)."
    )
    first, second = verdict.details["orders"]
    assert first["winner"] == "candidate" and second["raw"] == "Hard to say."
    assert verdict.tokens > 0


async def test_pairwise_with_an_unreachable_judge_is_an_error(judge, settings):
    settings.LLM_BASE_URL = closed_port_url()
    verdict = await compared(judge, "It is Paris.", "It is Lyon.")
    assert verdict.value is None and "could not be reached" in verdict.error


async def test_pairwise_without_a_baseline_answer_is_an_error(judge, upstream):
    verdict = await compared(judge, "It is Paris.", None)
    assert verdict.error == "There is no baseline answer to compare with."
    assert upstream.requests == []
