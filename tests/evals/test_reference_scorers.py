"""The scorers that need no model: each one's verdicts, how answers are normalised, and the
errors they give instead of a guess."""

from __future__ import annotations

import pytest

from evals_app.scorers import Case, SpecError, build


async def verdict(spec, answer: str, reference: str | None = None):
    return await build(spec).score(Case([{"role": "user", "content": "Q?"}], answer, reference))


@pytest.mark.parametrize(
    ("answer", "reference", "spec", "value"),
    [
        ("Paris", "Paris", "exact", 1.0),
        ("  paris \n", "Paris", "exact", 1.0),  # ends trimmed, case ignored
        ("The  capital\tis Paris", "the capital is paris", "exact", 1.0),  # runs of spaces
        ("paris", "Paris", {"name": "exact", "case_sensitive": True}, 0.0),
        ("Paris, France", "Paris", "exact", 0.0),
    ],
)
async def test_exact_compares_normalised_text(answer, reference, spec, value):
    result = await verdict(spec, answer, reference)
    assert result.value == value and not result.error
    assert result.reason == ("Same as the reference." if value else "Differs from the reference.")


@pytest.mark.parametrize(
    ("answer", "reference", "spec", "value"),
    [
        ("It is PARIS, of course.", "paris", "contains", 1.0),
        ("It is Lyon.", "paris", "contains", 0.0),
        ("The capital   is Paris.", "capital is", "contains", 1.0),
        ("It is Paris.", None, {"name": "contains", "text": "paris"}, 1.0),  # its own text
        ("It is Paris.", "PARIS", {"name": "contains", "case_sensitive": True}, 0.0),
    ],
)
async def test_contains_looks_for_the_reference_or_its_own_text(answer, reference, spec, value):
    assert (await verdict(spec, answer, reference)).value == value


async def test_regex_searches_the_answer_and_says_what_matched():
    spec = {"name": "regex", "pattern": r"\b\d{4}-\d{2}-\d{2}\b"}
    found = await verdict(spec, "It was on 2024-05-17, a Friday.")
    assert found.value == 1.0 and "2024-05-17" in found.reason
    missed = await verdict(spec, "It was on a Friday.")
    assert missed.value == 0.0 and missed.reason == "No match."


async def test_regex_ignores_case_with_the_i_flag():
    assert (await verdict({"name": "regex", "pattern": "^yes"}, "Yes.")).value == 0.0
    assert (await verdict({"name": "regex", "pattern": "^yes", "flags": "i"}, "Yes.")).value == 1.0


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ('{"a": 1}', 1.0),
        ('```json\n{"a": [1, 2]}\n```', 1.0),  # one fenced block
        ("[1, 2, 3]", 1.0),
        ("{'a': 1}", 0.0),
        ('Here it is: {"a": 1}', 0.0),  # JSON, not text around JSON
    ],
)
async def test_json_valid(answer, value):
    result = await verdict("json_valid", answer)
    assert result.value == value
    assert result.reason.startswith("Valid JSON" if value else "Not JSON")


async def test_json_equal_ignores_key_order_and_spacing():
    reference = '{"city": "Paris", "tags": [1, 2]}'
    same = await verdict(
        "json_equal", '```json\n{ "tags": [1,2], "city": "Paris" }\n```', reference
    )
    assert same.value == 1.0 and same.reason == "Same JSON value."
    other = await verdict("json_equal", '{"city": "Lyon", "tags": [1, 2]}', reference)
    assert other.value == 0.0 and other.reason == "A different JSON value."
    broken = await verdict("json_equal", "city: Paris", reference)
    assert broken.value == 0.0 and broken.reason.startswith("The answer is not JSON")


async def test_json_equal_with_a_reference_that_is_not_json_is_an_error():
    result = await verdict("json_equal", '{"a": 1}', "a is one")
    assert result.value is None and result.error.startswith("The reference is not JSON")


@pytest.mark.parametrize(
    ("answer", "reference", "value"),
    [
        ("the cat sat on the mat", "The cat  sat on the mat", 1.0),
        ("the cat sat", "the cat sat on the mat", 0.6667),  # 2 * 3 / (3 + 6)
        ("a dog ran", "the cat sat", 0.0),
    ],
)
async def test_similarity_is_the_share_of_words_in_order(answer, reference, value):
    result = await verdict("similarity", answer, reference)
    assert result.value == value
    assert result.reason == f"{value:.0%} of the words match in order."


@pytest.mark.parametrize("spec", ["exact", "contains", "json_equal", "similarity"])
async def test_scorers_against_a_reference_give_an_error_without_one(spec):
    result = await verdict(spec, "Paris", None)
    assert result.value is None
    assert result.error == "The item has no reference answer."


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nonsense", "Unknown scorer"),
        ({"name": "regex"}, "give a 'pattern'"),
        ({"name": "regex", "pattern": "("}, "does not compile"),
        ({"name": "contains", "text": ""}, "non-empty string"),
        ({"name": "judge"}, "needs a judge agent"),
        ({"name": "pairwise"}, "needs a judge agent"),
    ],
)
def test_a_spec_that_cannot_be_used_is_refused_with_the_reason(spec, message):
    with pytest.raises(SpecError, match=message):
        build(spec)


def test_a_scorers_key_names_its_options():
    assert build("exact").key == "exact"
    one = build({"name": "regex", "pattern": "a"}).key
    assert one.startswith("regex:") and one != build({"name": "regex", "pattern": "b"}).key
    assert one == build({"pattern": "a", "name": "regex"}).key
