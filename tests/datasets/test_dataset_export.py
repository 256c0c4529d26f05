"""Dataset exports: every format against its golden file, OpenAI's and Hugging Face's rules,
the checks and redaction, the dataset card, and the export_dataset command.

The dataset is made as staff make one: runs answered by the scripted upstream (one with a tool
round), then collected as run, session and pair items. Ids and dates are then fixed so the
golden files stay byte-stable (PARLEY_WRITE_GOLDEN=1 rewrites them).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command

from datasets_app import export
from datasets_app.export.formats import FORMATS_BY_NAME
from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemStatus
from datasets_app.services import collect, snapshot
from sessions_app import engine
from sessions_app.engine import lifespan
from sessions_app.models import Agent, Run, User
from sessions_app.services import feedback
from testkit.upstream import Reply
from tests.conftest import ROOT, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

GOLDEN = Path(__file__).parent / "golden" / "datasets"
EMAIL_TEXT = "Write to alice@example.com, my key is sk-live1234567890abcdefghij"


def item_id(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


@pytest.fixture
def state_tool_agent(brief_agent: Agent) -> Agent:
    """The default agent told "Be brief." and given the tool that updates session state, so the
    runs exported hold a system message, a tool call and its result."""
    brief_agent.enable_agentic_state = True
    brief_agent.save(update_fields=["enable_agentic_state"])
    return brief_agent


async def finish(user, text: str, **kwargs) -> Run:
    # Sync tests' fixtures call it too: the engine then runs on the fixture's loop meanwhile.
    async with lifespan.serving():
        handle = await engine.start_run(user, text, **kwargs)
        return await handle.wait()


def _fix(item: DatasetItem, n: int, split: str, status: str = ItemStatus.ACCEPTED, **more) -> None:
    """Stable id, dates and split, so the golden files do not change from run to run."""
    day = datetime(2026, 3, n, 9, 0, tzinfo=UTC)
    DatasetItem.objects.filter(pk=item.pk).update(
        item_id=item_id(n), created_at=day, source_created_at=day, split=split, status=status,
        **more,
    )  # fmt: skip


def _curate(dataset_runs: dict[str, Run], staff) -> Dataset:
    dataset = Dataset.objects.create(
        name="support", description="Answers staff liked.", created_by=staff
    )
    DatasetRule.objects.create(dataset=dataset, rating=1, active=False)
    r = dataset_runs
    _fix(collect.add_run(dataset, r["tool"], with_pair=False)[0], 1, "train")
    session = r["sum2"].session
    _fix(collect.add_session(dataset, session), 2, "train", use_weights=True)
    corrected = collect.add_run(dataset, r["haiku"], with_pair=False)[0]
    fixed = "Soft rain on the roof."
    digest = snapshot.content_hash(corrected.messages, fixed)
    _fix(corrected, 3, "validation", corrected_answer=fixed, content_hash=digest)
    pair = collect.add_pair(dataset, r["joke_good"], r["joke_bad"])
    _fix(pair, 4, "train")
    _fix(collect.add_run(dataset, r["rejected"], with_pair=False)[0], 5, "train", "rejected")
    _fix(collect.add_run(dataset, r["bob"], with_pair=False)[0], 6, "train")
    _fix(collect.add_run(dataset, r["pending"], with_pair=False)[0], 7, "train", "pending")
    _fix(collect.add_run(dataset, r["email"], with_pair=False)[0], 8, "test")
    _fix(collect.add_run(dataset, r["email_again"], with_pair=False)[0], 9, "test")
    return dataset


@pytest.fixture
async def dataset(alice, bob, staff, state_tool_agent, upstream) -> Dataset:
    upstream.script(
        Reply(tool_calls=[{"id": "call_1", "name": "update_session_state",
                           "arguments": {"changes": {"city": "Paris"}}}]),
        Reply("Noted: you live in Paris."),
    )  # fmt: skip
    made = {"tool": await finish(alice, "Remember that I live in Paris.")}
    upstream.script(Reply("4."), Reply("6."))
    made["sum1"] = await finish(alice, "What is 2+2?")
    made["sum2"] = await finish(alice, "And 3+3?", session_id=made["sum1"].session_id)
    await sync_to_async(feedback.set_feedback)(alice, made["sum1"].pk, -1)
    await sync_to_async(feedback.set_feedback)(alice, made["sum2"].pk, 1)
    upstream.script(Reply("Rain falls."), Reply("Why? Because."), Reply("A pun about cats."))
    made["haiku"] = await finish(alice, "Write a haiku about rain.")
    made["joke_bad"] = await finish(alice, "Tell me a joke.")
    made["joke_good"] = await finish(
        alice, "Tell me a joke.", session_id=made["joke_bad"].session_id
    )
    await sync_to_async(feedback.set_feedback)(alice, made["joke_bad"].pk, -1)
    await sync_to_async(feedback.set_feedback)(alice, made["joke_good"].pk, 1)
    made["rejected"] = await finish(alice, "Say something rude.")
    made["pending"] = await finish(alice, "Not reviewed yet.")
    made["bob"] = await finish(bob, "Bob's private question.")
    made["email"] = await finish(alice, EMAIL_TEXT)
    made["email_again"] = await finish(alice, EMAIL_TEXT)
    bob.allow_training = False
    await bob.asave(update_fields=["allow_training"])
    return await sync_to_async(_curate)(made, staff)


def exported(dataset: Dataset, fmt: str, split: str | None = None, **kwargs) -> str:
    return "".join(export.lines(dataset, fmt, split, **kwargs))


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def golden(name: str, text: str) -> str:
    path = GOLDEN / name
    if os.environ.get("PARLEY_WRITE_GOLDEN"):
        path.write_text(text, encoding="utf-8", newline="")
    return path.read_bytes().decode("utf-8")


def user_texts(text: str) -> set[str]:
    return {m["content"] for line in jsonl(text) for m in line["messages"] if m["role"] == "user"}


# -- formats ----------------------------------------------------------------------------------


async def downloaded(dataset: Dataset, fmt: str) -> str:
    """The body of the export's HTTP response, read as ASGI streams it."""
    response = await sync_to_async(export.response)(dataset, fmt, actor=None)
    return b"".join([chunk async for chunk in response]).decode()


def commanded(fmt: str) -> str:
    out = io.StringIO()
    call_command("export_dataset", "--dataset", "support", "--format", fmt, stdout=out,
                 stderr=io.StringIO())  # fmt: skip
    return out.getvalue()


def test_each_format_writes_exactly_its_golden_file(dataset):
    from asgiref.sync import async_to_sync

    for fmt in export.FORMATS:
        text = exported(dataset, fmt)
        assert text == golden(FORMATS_BY_NAME[fmt].filename("support", None), text), fmt
        # The download and the command write the same bytes as the file.
        assert async_to_sync(downloaded)(dataset, fmt) == text, fmt
        assert commanded(fmt) == text, fmt


def test_only_accepted_items_of_owners_who_allow_training_are_exported(dataset):
    texts = user_texts(exported(dataset, "openai-chat"))
    assert "Remember that I live in Paris." in texts and "And 3+3?" in texts
    assert not {"Say something rude.", "Bob's private question.", "Not reviewed yet."} & texts
    # The pair is a preference, not a conversation to imitate.
    assert "Tell me a joke." not in texts
    assert {"Write a haiku about rain."} == user_texts(
        exported(dataset, "openai-chat", "validation")
    )


def test_openai_chat_lines_follow_openais_rules(dataset):
    lines = jsonl(exported(dataset, "openai-chat"))
    assert len(lines) == 5
    for line in lines:
        assert set(line) <= {"messages", "tools"}
        for message in line["messages"]:
            assert message["role"] in {"system", "user", "assistant", "tool"}
            assert "rating" not in message
            if "weight" in message:
                assert message["role"] == "assistant" and message["weight"] in (0, 1)
            for call in message.get("tool_calls", []):
                assert isinstance(call["function"]["arguments"], str)
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
        calls = [m for m in line["messages"] if m.get("tool_calls")]
        assert bool(calls) == ("tools" in line)
    by_first_user = {
        next(m["content"] for m in x["messages"] if m["role"] == "user"): x for x in lines
    }
    tool_line = by_first_user["Remember that I live in Paris."]
    assert [t["function"]["name"] for t in tool_line["tools"]] == ["update_session_state"]
    weighted = by_first_user["What is 2+2?"]["messages"]
    assert [(m["content"], m.get("weight")) for m in weighted if m["role"] == "assistant"] == [
        ("4.", 0),
        ("6.", 1),
    ]
    corrected = by_first_user["Write a haiku about rain."]["messages"]
    assert corrected[-1] == {"role": "assistant", "content": "Soft rain on the roof."}


def test_preferences_are_the_pairs_and_the_corrections(dataset):
    lines = jsonl(exported(dataset, "openai-preference"))
    outputs = [
        (
            line["input"]["messages"][-1]["content"],
            line["preferred_output"][0]["content"],
            line["non_preferred_output"][0]["content"],
        )
        for line in lines
    ]
    assert outputs == [
        ("Write a haiku about rain.", "Soft rain on the roof.", "Rain falls."),
        ("Tell me a joke.", "A pun about cats.", "Why? Because."),
    ]
    for line in lines:
        assert line["input"]["messages"][-1]["role"] == "user"
        assert [m["role"] for m in line["preferred_output"]] == ["assistant"]


def test_sharegpt_turns_tool_rounds_into_function_calls_and_observations(dataset):
    lines = jsonl(exported(dataset, "sharegpt"))
    tool_line = next(x for x in lines if "tools" in x)
    froms = [turn["from"] for turn in tool_line["conversations"]]
    assert froms == ["system", "human", "function_call", "observation", "gpt"]
    call = json.loads(tool_line["conversations"][2]["value"])
    assert call == {"name": "update_session_state", "arguments": {"changes": {"city": "Paris"}}}
    assert json.loads(tool_line["tools"])[0]["function"]["name"] == "update_session_state"


def test_csv_has_a_row_per_turn_and_quotes_formulas(dataset):
    DatasetItem.objects.filter(pk=item_id(3)).update(corrected_answer="=HYPERLINK(1)")
    rows = list(csv.DictReader(io.StringIO(exported(dataset, "csv"))))
    assert {row["item_id"] for row in rows} == {str(item_id(n)) for n in (1, 2, 3, 8, 9)}
    haiku = [row for row in rows if row["item_id"] == str(item_id(3))]
    assert [row["role"] for row in haiku] == ["system", "user", "assistant"]
    assert haiku[-1]["content"] == "'=HYPERLINK(1)"
    call = next(row for row in rows if row["tool_calls"])
    assert json.loads(call["tool_calls"])[0]["function"]["name"] == "update_session_state"
    weights = [row["weight"] for row in rows if row["item_id"] == str(item_id(2))]
    assert weights == ["", "", "0", "", "1"]


def _template_renderer():
    """SmolLM2's chat template, read from the GGUF the embedded model ships, rendered the way
    transformers renders chat templates."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp import Llama

    from serving.embedded import model_path

    model = Llama(model_path=str(model_path()), vocab_only=True, verbose=False)
    source = model.metadata["tokenizer.chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value, **kw: json.dumps(value, ensure_ascii=False, **kw)
    return env.from_string(source)


def test_hf_messages_load_with_datasets_and_render_through_a_chat_template(dataset, tmp_path):
    datasets = pytest.importorskip("datasets")
    path = tmp_path / "support.hf-messages.jsonl"
    written = exported(dataset, "hf-messages")
    path.write_text(written, encoding="utf-8")
    loaded = datasets.load_dataset(
        "json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert loaded.num_rows == 5
    assert [row["messages"] for row in loaded] == [line["messages"] for line in jsonl(written)]
    template = _template_renderer()
    for row in loaded:
        json.loads(row["tools"])
        rendered = template.render(messages=row["messages"], add_generation_prompt=False)
        for message in row["messages"]:
            assert f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>" in rendered
        call = next((m for m in row["messages"] if m.get("tool_calls")), None)
        if call is not None:
            assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {
                "changes": {"city": "Paris"}
            }


def test_an_export_is_byte_identical_twice_sync_and_async(dataset):
    for fmt in export.FORMATS:
        first = exported(dataset, fmt)
        assert first == exported(dataset, fmt)

        async def collect_async(fmt=fmt) -> str:
            return "".join([text async for text in export.alines(dataset, fmt)])

        from asgiref.sync import async_to_sync

        assert async_to_sync(collect_async)() == first


def test_an_unknown_format_or_split_is_refused(dataset):
    with pytest.raises(export.UnknownFormat, match="choose one of openai-chat"):
        list(export.lines(dataset, "parquet"))
    with pytest.raises(ValueError, match="Unknown split"):
        list(export.lines(dataset, "csv", "holdout"))


async def test_the_response_is_a_streamed_attachment_named_after_dataset_split_and_format(dataset):
    response = await sync_to_async(export.response)(dataset, "openai-chat", "train", actor=None)
    assert response.is_async and response.streaming
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    assert (
        response["Content-Disposition"] == 'attachment; filename="support-train.openai-chat.jsonl"'
    )
    body = b"".join([chunk async for chunk in response])
    expected = await sync_to_async(exported)(dataset, "openai-chat", "train")
    assert body.decode() == expected
    card = await sync_to_async(export.card_response)(dataset, "csv")
    assert card["Content-Disposition"] == 'attachment; filename="support.card.md"'
    assert card.content.decode().startswith("# support\n")


# -- checks, redaction, card ------------------------------------------------------------------


def test_checks_report_secrets_and_duplicates_with_their_items(dataset):
    found = {(f.item_id, f.check): f.detail for f in export.check(dataset, "openai-chat")}
    assert found == {
        (str(item_id(8)), "personal data"): "2 × API key, 2 × e-mail address "
        "(export with redaction to replace them)",
        (str(item_id(9)), "personal data"): "2 × API key, 2 × e-mail address "
        "(export with redaction to replace them)",
        (str(item_id(9)), "duplicate"): f"same conversation as item {item_id(8)}",
    }


def _broken(dataset: Dataset, n: int, messages: list[dict], **more) -> None:
    """An accepted item of alice's (who allows training use), as broken as it is given."""
    DatasetItem.objects.create(
        item_id=item_id(n), dataset=dataset, source="run", messages=messages,
        owner=User.objects.get(username="alice"),
        status=ItemStatus.ACCEPTED, split="train", content_hash=f"broken-{n}", **more,
    )  # fmt: skip


def test_checks_find_broken_conversations_and_never_drop_them(dataset, settings):
    settings.PARLEY_DATASET_MAX_TURN_CHARS = 50
    user, answer = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
    call = {"id": "c9", "type": "function", "function": {"name": "lookup", "arguments": "[1]"}}
    _broken(dataset, 20, [answer, {"role": "system", "content": "late"}, user, answer])
    _broken(
        dataset,
        21,
        [user, {"role": "assistant", "content": "", "tool_calls": [call]}, user, answer],
    )
    _broken(
        dataset,
        22,
        [
            user,
            {"role": "assistant", "content": " "},
            user,
            {"role": "assistant", "content": "x" * 60},
        ],
    )
    _broken(dataset, 23, [user, {"role": "tool", "tool_call_id": "nope", "content": "r"}, answer])
    found = [
        (uuid.UUID(f.item_id).int, f.check, f.detail) for f in export.check(dataset, "csv", "train")
    ]
    assert found == [
        (20, "role order", "turn 0: an assistant turn that answers no user turn or tool result"),
        (20, "role order", "turn 1: a system message after the first turn"),
        (21, "tool call without result", "turn 1: call c9 (lookup)"),
        (21, "tool arguments", "turn 1: the arguments of lookup are not a JSON object"),
        (22, "empty turn", "turn 1 (assistant) is empty"),
        (22, "oversized turn", "turn 3 (assistant): 60 characters, over 50"),
        (23, "role order", "turn 1: a tool result that answers no call"),
    ]
    written = {
        row["item_id"] for row in csv.DictReader(io.StringIO(exported(dataset, "csv", "train")))
    }
    assert {str(item_id(n)) for n in (20, 21, 22, 23)} <= written


def test_redaction_replaces_secrets_in_what_is_written_and_says_so(dataset):
    for fmt in ("openai-chat", "sharegpt", "hf-messages", "csv"):
        text = exported(dataset, fmt, "test", redact=True)
        assert "alice@example.com" not in text and "sk-live" not in text
        assert "[email]" in text and "[api-key]" in text
    assert "alice@example.com" in exported(dataset, "openai-chat", "test")
    found = [
        (f.check, f.detail, f.blocking)
        for f in export.check(dataset, "openai-chat", "test", redact=True)
    ]
    assert ("redacted", "replaced 2 × API key, 2 × e-mail address", False) in found


def test_redacted_tool_arguments_stay_json_and_keep_ids_and_numbers(dataset):
    ref = "550e8400-e29b-41d4-a716-446655440000"
    arguments = {"order": 1234567890, "to": "alice@example.com", "ref": ref,
                 "note": "call +44 20 7946 0958", "at": "1712345678"}  # fmt: skip
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "ship", "arguments": arguments}},
        {"id": "c2", "type": "function",
         "function": {"name": "ship", "arguments": json.dumps(arguments)}},
    ]  # fmt: skip
    _broken(
        dataset,
        30,
        [
            {"role": "user", "content": "Ship order 1234567890."},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "sent"},
            {"role": "tool", "tool_call_id": "c2", "content": "sent"},
            {"role": "assistant", "content": "Shipped."},
        ],
    )
    (line,) = jsonl(exported(dataset, "openai-chat", "train", redact=True))[-1:]
    written = [json.loads(c["function"]["arguments"]) for c in line["messages"][1]["tool_calls"]]
    expected = {**arguments, "to": "[email]", "note": "call [phone]"}
    assert written == [expected, expected]
    assert line["messages"][0]["content"] == "Ship order 1234567890."
    found = [(f.check, f.detail) for f in export.check(dataset, "openai-chat", "train")]
    assert found == [("personal data", "2 × e-mail address, 2 × phone number "
                      "(export with redaction to replace them)")]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail bob.smith+x@mail.example.org now", "mail [email] now"),
        ("call 555-123-4567 or +15551234567", "call [phone] or [phone]"),
        ("run 550e8400-e29b-41d4-a716-446655440000 at 1712345678, order 1234567890", None),
        ("item 12345678-1234-5678-9abc-def012345678", None),
        ("call +44 20 7946 0958 or (555) 123-4567", "call [phone] or [phone]"),
        ("Authorization: Bearer abc.def-ghi_jkl012345", "Authorization: Bearer [token]"),
        ("AKIAIOSFODNN7EXAMPLE and ghp_abcdefghijklmnopqrstuvwxyz0123", "[api-key] and [api-key]"),
        (
            "digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "digest [secret]",
        ),
        ("on 2026-03-01 we sold 1500 units at 12.50", "on 2026-03-01 we sold 1500 units at 12.50"),
        ("see https://example.com/a-rather-long-article-title-about-things", None),
    ],
)
def test_redaction_patterns(text, expected):
    from datasets_app.export.redact import Redactor

    assert Redactor()(text) == (text if expected is None else expected)


def test_the_card_says_what_the_export_holds(dataset):
    findings = export.check(dataset, "openai-chat")
    text = export.card(dataset, "openai-chat", None, findings)
    assert text == golden("support.openai-chat.card.md", text)
    assert "Exported items by source: run 4, session 1, pair 1, experiment 0." in text
    assert "accepted but left out (owner opted out of training use, or deleted): 1" in text
    assert "Source conversations from 2026-03-01 to 2026-03-09." in text
    assert f"| {item_id(9)} | duplicate | same conversation as item {item_id(8)} |" in text


def test_the_card_lists_the_first_hundred_findings_and_counts_the_rest(dataset, alice):
    user = {"role": "user", "content": "hi"}
    DatasetItem.objects.bulk_create(
        DatasetItem(
            item_id=item_id(1000 + n), dataset=dataset, source="run", messages=[user],
            status=ItemStatus.ACCEPTED, split="train", content_hash=f"unanswered-{n}", owner=alice,
        )
        for n in range(110)
    )  # fmt: skip
    text = export.card(dataset, "csv", "train", export.check(dataset, "csv", "train"))
    assert "110 findings:" in text
    assert text.count("| role order | does not end with an assistant answer |") == 100
    assert "… and 10 more: role order 10." in text


def test_the_card_shows_names_and_descriptions_as_text_never_as_html(dataset, state_tool_agent):
    dataset.description = "<script>alert(1)</script> & `code`\r\n<img src=x onerror=alert(2)>"
    dataset.save()
    state_tool_agent.name = "<b onmouseover=alert(3)>Evil</b>"
    state_tool_agent.save()
    DatasetRule.objects.create(dataset=dataset, agent=state_tool_agent, rating=-1)
    DatasetItem.objects.filter(pk=item_id(1)).update(model="<iframe src=//x>|`m`")
    text = export.card(dataset, "openai-chat", None, export.check(dataset, "openai-chat"))
    assert "<" not in text and ">" not in text and "\r" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; \\`code\\`\n&lt;img" in text
    assert "- &lt;b onmouseover=alert(3)&gt;Evil&lt;/b&gt;, rated down" in text
    assert "- &lt;iframe src=//x&gt;|\\`m\\`: 1" in text


def _without_losing_answer(dataset: Dataset) -> None:
    """The pair (item 4) loses its losing answer: a finding only where pairs are written."""
    DatasetItem.objects.filter(pk=item_id(4)).update(rejected_answer="")


def test_checks_look_only_at_the_items_the_format_writes(dataset):
    _without_losing_answer(dataset)
    empty = (str(item_id(4)), "empty turn", "the losing answer is empty")
    chat = [(f.item_id, f.check, f.detail) for f in export.check(dataset, "openai-chat", "train")]
    assert chat == []
    preference = export.check(dataset, "openai-preference", "train")
    assert [(f.item_id, f.check, f.detail) for f in preference] == [empty]
    card = export.card(
        dataset, "openai-chat", "train", export.check(dataset, "openai-chat", "train")
    )
    assert "No findings." in card and str(item_id(4)) not in card


# -- the command ------------------------------------------------------------------------------


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "export_dataset", *args],
        cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_command_writes_only_the_data_to_stdout(dataset):
    done = manage("--dataset", "support", "--format", "openai-chat", "--split", "train")
    assert done.returncode == 0, done.stderr
    assert done.stdout == exported(dataset, "openai-chat", "train")
    assert "2 items written" in done.stderr and "export" in done.stderr  # the progress bar


def test_the_command_writes_the_file_and_its_card_beside_it(dataset, tmp_path):
    out = tmp_path / "support.sharegpt.jsonl"
    done = manage("--dataset", "support", "--format", "sharegpt", "--output", str(out), "--redact")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert out.read_text(encoding="utf-8") == exported(dataset, "sharegpt", redact=True)
    card = (tmp_path / "support.sharegpt.card.md").read_text(encoding="utf-8")
    assert "| Redaction | on |" in card and "redacted" in card
    assert f"{item_id(9)}  duplicate: same conversation as item {item_id(8)}" in done.stderr


def test_strict_mode_fails_before_writing_anything(dataset, tmp_path):
    out = tmp_path / "out.jsonl"
    done = manage("--dataset", "support", "--format", "csv", "--output", str(out), "--strict")
    assert done.returncode == 1
    assert "3 findings; nothing written (--strict): duplicate 1, personal data 2." in done.stderr
    assert not out.exists() and not (tmp_path / "out.card.md").exists()
    clean = manage("--dataset", "support", "--format", "csv", "--split", "train", "--strict")
    assert clean.returncode == 0, clean.stderr


def test_strict_mode_refuses_only_for_the_items_the_format_writes(dataset):
    _without_losing_answer(dataset)
    args = ["--dataset", "support", "--split", "train", "--strict"]
    err = io.StringIO()
    call_command(
        "export_dataset", *args, "--format", "openai-chat", stdout=io.StringIO(), stderr=err
    )
    assert "2 items written; 0 findings." in err.getvalue()
    with pytest.raises(
        CommandError, match=re.escape("1 findings; nothing written (--strict): empty turn 1.")
    ):
        call_command("export_dataset", *args, "--format", "openai-preference",
                     stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip


def test_the_command_explains_what_it_cannot_do(dataset):
    for args, message in [
        (["--dataset", "nope", "--format", "csv"], "No dataset named “nope” (datasets: support)"),
        (
            ["--dataset", "support", "--format", "xml"],
            "Unknown export format “xml”; choose one of openai-chat",
        ),
        (["--dataset", "support", "--format", "csv", "--split", "dev"], "Unknown split “dev”"),
    ]:
        with pytest.raises(CommandError, match=re.escape(message)):
            call_command("export_dataset", *args, stdout=io.StringIO(), stderr=io.StringIO())
