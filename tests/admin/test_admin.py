"""Staff inspect every session, run and model call in the Django admin, read like the chat."""

from __future__ import annotations

import json
import re
from datetime import UTC, timedelta

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_app.accounts import create_token
from sessions_app.admin.sessions import SessionAdmin
from sessions_app.engine import liveness
from sessions_app.models import (
    Agent,
    ApiToken,
    CallKind,
    LLMCall,
    Message,
    NameSource,
    Role,
    Run,
    RunStatus,
    Session,
)
from tests.support.apiclient import stored_run
from tests.support.processes import a_dead_worker

pytestmark = pytest.mark.django_db

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def helper_agent() -> Agent:
    """An agent besides the default one: the session list shows its name, Helper."""
    return Agent.objects.create(name="Helper", model="scripted", instructions="Be brief.")


@pytest.fixture
def sessions(alice, helper_agent) -> list[Session]:
    return Session.objects.bulk_create(
        [Session(user=alice, agent=helper_agent, session_name=f"chat {i}") for i in range(3)]
    )


@pytest.fixture
def conversation(alice, helper_agent) -> Session:
    """A session of three runs: a tool call, a rated answer in Markdown, a failed run."""
    session = Session.objects.create(
        user=alice, agent=helper_agent, session_name="Weather talk", summary={"summary": "Talked."}
    )
    first = stored_run(session, "What's the weather?", "", duration=1.727307221999979)
    first.messages.filter(role=Role.ASSISTANT).update(
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ]
    )
    Message.objects.create(
        run=first, session=session, order=2, role=Role.TOOL, content="18 °C", tool_call_id="call_1"
    )
    Message.objects.create(
        run=first, session=session, order=3, role=Role.ASSISTANT, content="It is **18 °C**."
    )
    Run.objects.filter(pk=first.pk).update(
        content="It is **18 °C**.",
        feedback_rating=1,
        feedback_comment="Spot on",
        feedback_at=timezone.now(),
        session_state={"city": "Paris"},
        cost="0.000123",
    )
    LLMCall.objects.filter(run=first).update(cost="0.000123")
    stored_run(session, "And tomorrow?", "Sunny, `22 °C`.")
    stored_run(
        session, "And next week?", "", status=RunStatus.ERROR, duration=0.2
    ).__class__.objects.filter(session=session, position=3).update(
        error="The model is unreachable."
    )
    return session


def test_staff_list_every_users_sessions(root, sessions):
    page = root.get("/admin/sessions_app/session/").content.decode()
    for session in sessions:
        assert session.session_name in page
        assert f'value="{session.session_id}" class="action-select"' in page


@pytest.mark.parametrize("written_directly", [True, False])
def test_the_row_checkbox_is_exactly_djangos(superuser, sessions, settings, written_directly):
    settings.PARLEY_TUNE_ADMIN_CHECKBOX = written_directly
    ours = SessionAdmin(Session, admin.site)
    stock = admin.ModelAdmin(Session, admin.site)
    assert ours.action_checkbox(sessions[0]) == stock.action_checkbox(sessions[0])


def test_selected_sessions_can_be_deleted_from_the_list(root, sessions):
    picked = [str(s.session_id) for s in sessions[:2]]
    form = {"action": "delete_selected", "_selected_action": picked}
    confirm = root.post("/admin/sessions_app/session/", form)
    assert "Are you sure" in confirm.content.decode()
    done = root.post("/admin/sessions_app/session/", {**form, "post": "yes"})
    assert done.status_code == 302
    assert list(Session.objects.values_list("session_name", flat=True)) == ["chat 2"]


@pytest.mark.parametrize(
    "path",
    [
        "/admin/",
        "/admin/sessions_app/session/",
        "/admin/sessions_app/run/",
        "/admin/sessions_app/message/",
        "/admin/sessions_app/llmcall/",
        "/admin/sessions_app/user/",
    ],
)
def test_the_admin_is_closed_to_anyone_who_is_not_staff(alice, conversation, path):
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    user = Client()
    user.force_login(alice)
    response = user.get(path)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert conversation.session_name not in response.content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/admin/login/",
        "/admin/",
        "/admin/sessions_app/session/",
        "/admin/sessions_app/session/{session}/change/",
        "/admin/dashboard/",
        "/admin/password_change/",
    ],
)
def test_the_admin_goes_by_parleys_name(root, conversation, path):
    client = Client() if path == "/admin/login/" else root
    page = client.get(path.format(session=conversation.pk)).content.decode()
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    header = re.search(r'<div id="site-name">(.*?)</div>', page, re.S).group(1)
    assert title.strip().endswith("| Parley admin")
    assert ">Parley</a>" in header
    assert "Django" not in title + header
    if path == "/admin/":
        assert "<h1>Parley administration</h1>" in page


def test_the_session_list_shows_what_each_session_cost_and_whether_it_failed(root, conversation):
    owner, agent = conversation.user, conversation.agent
    clean = Session.objects.create(user=owner, agent=agent, session_name="Calm")
    stored_run(clean, "Hello?", "Hi.")
    stored_run(conversation, "Once more?", "", status=RunStatus.ERROR)
    page = root.get("/admin/sessions_app/session/").content.decode()
    row = page[page.index("Weather talk") :].split("</tr>")[0]
    assert ">alice<" in row and ">Helper<" in row
    assert ">4<" in row  # runs
    assert ">60<" in row  # tokens: four runs of 10 + 5
    assert "$0.0001" in row  # the priced call
    failed = '<span class="parley-status status-error">2 failed</span>'
    assert f'<td class="field-errors">{failed}</td>' in row
    calm = page[page.index(">Calm<") :].split("</tr>")[0]
    assert '<td class="field-errors"></td>' in calm  # nothing to mark
    assert "icon-yes" not in page and "icon-no" not in page  # no ticks and crosses
    transcript = root.get(f"/admin/sessions_app/session/{conversation.pk}/change/")
    assert "4 runs · 60 tokens · $0.0001 · 2 runs failed" in transcript.content.decode()
    one = root.get(f"/admin/sessions_app/session/{clean.pk}/change/").content.decode()
    assert "1 run · 15 tokens" in one


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("has_errors=yes", ["Weather talk"]),
        ("has_errors=no", ["Quiet"]),
        ("has_feedback=yes", ["Weather talk"]),
        ("owner=bob", ["Quiet"]),
        ("q=weather", ["Weather talk"]),
    ],
)
def test_sessions_are_found_by_errors_feedback_owner_and_name(
    root, conversation, bob, helper_agent, query, expected
):
    Session.objects.create(user=bob, agent=helper_agent, session_name="Quiet")
    page = root.get(f"/admin/sessions_app/session/?{query}").content.decode()
    found = [name for name in ("Weather talk", "Quiet") if f">{name}<" in page]
    assert found == expected


def test_a_pasted_session_id_finds_its_session(root, conversation, sessions):
    page = root.get(f"/admin/sessions_app/session/?q={conversation.session_id}").content.decode()
    assert ">Weather talk<" in page and ">chat 0<" not in page


@pytest.mark.parametrize("term", ["' OR 1=1 --", "%", "_", "\\", "😀" * 50])
def test_search_terms_that_look_like_sql_match_only_themselves(root, conversation, term):
    for path in ("session", "run", "message", "user"):
        response = root.get(f"/admin/sessions_app/{path}/", {"q": term})
        assert response.status_code == 200
        assert list(response.context["cl"].result_list) == [], path


@pytest.mark.parametrize("term", ["%E2%80%AE%00x", "%ED%A0%80", "a%CC%81" * 40, "%FF%FE"])
def test_unicode_hostile_search_terms_answer_a_page(root, conversation, term):
    for path in ("session", "run", "message", "llmcall", "user", "agent"):
        assert root.get(f"/admin/sessions_app/{path}/?q={term}").status_code == 200, path


def test_a_session_page_is_a_transcript(root, conversation):
    response = root.get(f"/admin/sessions_app/session/{conversation.session_id}/change/")
    page = response.content.decode()
    assert page.index("What&#x27;s the weather?") < page.index("And tomorrow?")
    assert page.index("And tomorrow?") < page.index("And next week?")
    assert "It is <strong>18 °C</strong>." in page  # Markdown, rendered
    assert "<code>22 °C</code>" in page
    assert "<code>get_weather</code>" in page and "&quot;city&quot;: &quot;Paris&quot;" in page
    assert "18 °C</pre>" in page  # the tool's result
    assert "1.73 s" in page and "1.727307" not in page
    assert "$0.0001" in page
    assert "Spot on" in page and "👍" in page
    assert "The model is unreachable." in page
    assert page.count('data-testid="transcript-run"') == 3
    assert "Talked." in page  # the summary
    assert "&#x27;city&#x27;: &#x27;Paris&#x27;" in page  # the state this run left
    assert f'href="/admin/sessions_app/user/{conversation.user_id}/change/"' in page
    assert f'href="/admin/sessions_app/agent/{conversation.agent_id}/change/"' in page


def test_on_a_session_page_only_its_name_state_and_metadata_are_form_fields(root, conversation):
    page = root.get(f"/admin/sessions_app/session/{conversation.session_id}/change/")
    fields = set(page.context["adminform"].form.fields)
    assert fields == {"session_name", "session_state", "metadata"}


def test_staff_rename_and_set_state_as_validated_json(root, conversation):
    url = f"/admin/sessions_app/session/{conversation.session_id}/change/"
    form = {"session_name": "Renamed", "session_state": '{"city": "Lyon"}', "metadata": "{}"}
    assert root.post(url, form).status_code == 302
    conversation.refresh_from_db()
    assert conversation.session_name == "Renamed"
    assert conversation.name_source == NameSource.USER  # a generated title won't replace it
    assert conversation.session_state == {"city": "Lyon"}
    for bad in ("{not json", "[1, 2]", '"text"'):
        response = root.post(url, {**form, "session_state": bad})
        assert response.status_code == 200
        assert "errornote" in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.session_state == {"city": "Lyon"}
    assert conversation.runs.count() == 3  # the record is untouched


def test_saving_a_session_page_keeps_state_a_run_changed_meanwhile(root, conversation):
    url = f"/admin/sessions_app/session/{conversation.session_id}/change/"
    shown = root.get(url).context["adminform"].form.initial
    Session.objects.filter(pk=conversation.pk).update(session_state={"city": "Rome"})
    form = {
        "session_name": "Only the name",
        "session_state": json.dumps(shown["session_state"]),
        "metadata": json.dumps(shown["metadata"]),
        "initial-session_state": json.dumps(shown["session_state"]),
    }
    assert root.post(url, form).status_code == 302
    conversation.refresh_from_db()
    assert conversation.session_name == "Only the name"
    assert conversation.session_state == {"city": "Rome"}


def test_a_session_with_an_answer_in_progress_is_not_deleted(root, conversation):
    Run.objects.filter(session=conversation, position=3).update(status=RunStatus.RUNNING)
    url = f"/admin/sessions_app/session/{conversation.session_id}/delete/"
    assert root.post(url, {"post": "yes"}).status_code == 403
    form = {"action": "delete_selected", "_selected_action": [str(conversation.session_id)]}
    root.post("/admin/sessions_app/session/", {**form, "post": "yes"})
    run = conversation.runs.get(position=3)
    assert (
        root.post(f"/admin/sessions_app/run/{run.run_id}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert Session.objects.filter(pk=conversation.pk).exists()


def test_a_run_page_shows_its_messages_and_its_model_calls(root, conversation):
    run = conversation.runs.get(position=1)
    LLMCall.objects.filter(run=run).update(
        sent_messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Earlier question"},
            {"role": "user", "content": "What's the weather?"},
        ]
    )
    response = root.get(f"/admin/sessions_app/run/{run.run_id}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "It is <strong>18 °C</strong>." in page
    assert "Context as sent (3 messages)" in page and "Earlier question" in page
    assert "1.73 s" in page
    assert "Usage: reported by the model" in page
    assert 'name="_save"' not in page  # a record, read-only


def run_pages(run: Run) -> list[str]:
    """Where staff read a run's figures: its own page, its session's transcript, the runs list."""
    return [
        f"/admin/sessions_app/run/{run.run_id}/change/",
        f"/admin/sessions_app/session/{run.session_id}/change/",
        "/admin/sessions_app/run/",
    ]


def a_long_story(user, agent: Agent, session_name: str, **fields) -> Run:
    """A run still going, as its process left it: `fields` say how far."""
    session = Session.objects.create(user=user, agent=agent, session_name=session_name)
    return Run.objects.create(
        session=session,
        user=user,
        agent=agent,
        position=1,
        status=RunStatus.RUNNING,
        input="Tell me a long story",
        **fields,
    )


def assert_figures_read(root: Client, run: Run, usage: str) -> None:
    """Where staff read the run's figures, each says `usage` and shows no tokens."""
    run_page, transcript, runs = (root.get(path).content.decode() for path in run_pages(run))
    assert f"Usage: {usage}" in run_page
    assert "Tokens in: – · Tokens out: –" in run_page
    assert f"<dt>Usage</dt><dd>{usage}</dd>" in transcript
    for page in (run_page, transcript):
        assert "reported by the model" not in page
    row = runs[runs.index("Tell me a long story") :].split("</tr>")[0]
    assert '<td class="field-tokens">–</td>' in row


def test_a_run_still_answering_says_its_figures_come_when_it_ends(root, alice, helper_agent):
    run = a_long_story(alice, helper_agent, "Live", content="Once upon a time")
    assert_figures_read(root, run, "still running: figures come when it ends")


def test_a_run_whose_process_died_says_its_figures_are_unknown(root, alice, helper_agent):
    worker = {"worker": a_dead_worker(), "heartbeat_at": timezone.now()}
    cut = a_long_story(alice, helper_agent, "Cut", **worker)
    assert liveness.reap_stale_runs() == [(cut.pk, cut.session_id)]
    assert_figures_read(root, cut, "unknown: the run stopped before its use was counted")


def test_every_table_has_a_list_that_staff_can_read(root, conversation, alice):
    create_token(alice, "laptop")
    secret_hash = ApiToken.objects.get().token_hash
    for path in ("agent", "apitoken", "user", "llmcall", "message", "run", "session"):
        response = root.get(f"/admin/sessions_app/{path}/")
        assert response.status_code == 200, path
        assert secret_hash not in response.content.decode()
    token_page = root.get(f"/admin/sessions_app/apitoken/{ApiToken.objects.get().pk}/change/")
    assert secret_hash not in token_page.content.decode()
    users = root.get("/admin/sessions_app/user/").content.decode()
    row = users[users.index(">alice<") :].split("</tr>")[0]
    assert ">1<" in row and ">3<" in row and ">45<" in row  # sessions, runs, tokens


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=ERROR", {3}),
        ("rating=1", {1}),
        ("rating=none", {2, 3}),
        ("model=scripted", {1, 2, 3}),
        ("model=other", set()),
    ],
)
def test_runs_are_filtered_by_status_rating_and_model(root, conversation, query, expected):
    response = root.get(f"/admin/sessions_app/run/?{query}")
    shown = {run.position for run in response.context["cl"].result_list}
    assert shown == expected


def test_staff_rate_runs_in_bulk_apart_from_their_users_feedback(root, conversation):
    runs = list(conversation.runs.order_by("position"))
    Run.objects.filter(pk=runs[1].pk).update(status=RunStatus.RUNNING)
    form = {"action": "rate_down", "_selected_action": [str(r.run_id) for r in runs[:2]]}
    response = root.post("/admin/sessions_app/run/", form, follow=True)
    assert "1 run rated bad by staff; 1 still answering, left unrated." in response.content.decode()
    rows = conversation.runs.order_by("position").values_list(
        "staff_rating", "feedback_rating", "feedback_comment"
    )
    assert list(rows) == [(-1, 1, "Spot on"), (None, None, ""), (None, None, "")]
    shown = root.get("/admin/sessions_app/run/?staff_rating=-1").context["cl"].result_list
    assert [r.position for r in shown] == [1]


def test_a_view_only_staff_member_cannot_rate(conversation, django_user_model):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    client = Client()
    client.force_login(viewer)
    run = conversation.runs.get(position=2)
    form = {"action": "rate_up", "_selected_action": [str(run.run_id)]}
    client.post("/admin/sessions_app/run/", form)
    run.refresh_from_db()
    assert run.staff_rating is None


def _export(client: Client, path: str, action: str, keys: list[str]) -> list[dict]:
    response = client.post(path, {"action": action, "_selected_action": keys})
    assert response["Content-Disposition"].startswith("attachment")
    return json.loads(b"".join(response))  # the sync client reads the stream whole


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")
def test_selected_sessions_export_as_json_in_the_apis_shape(root, conversation, sessions):
    keys = [str(conversation.session_id), str(sessions[0].session_id)]
    exported = _export(root, "/admin/sessions_app/session/", "export_sessions_json", keys)
    assert {s["session_name"] for s in exported} == {"Weather talk", "chat 0"}
    talk = next(s for s in exported if s["session_name"] == "Weather talk")
    assert talk["user_id"] == "alice" and talk["metrics"]["total_tokens"] == 45
    assert [r["input"] for r in talk["runs"]][:2] == ["What's the weather?", "And tomorrow?"]
    roles = [m["role"] for m in talk["runs"][0]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


@pytest.mark.django_db(transaction=True)
async def test_an_export_larger_than_a_page_streams_every_run_oldest_first(
    superuser, alice, helper_agent
):
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    from sessions_app.admin import actions

    @sync_to_async
    def seed() -> None:
        session = Session.objects.create(user=alice, agent=helper_agent, session_name="Long")
        for i in range(actions.CHUNK + 7):
            run = stored_run(session, f"q{i}", f"a{i}")
            Run.objects.filter(pk=run.pk).update(
                created_at=timezone.now() - timedelta(minutes=1000 - i)
            )

    await seed()
    client = AsyncClient()
    await client.aforce_login(superuser)
    keys = [str(k) async for k in Run.objects.values_list("pk", flat=True)]
    form = {"action": "export_runs_json", "_selected_action": keys}
    response = await client.post("/admin/sessions_app/run/", form)
    assert response.is_async
    body = b"".join([chunk async for chunk in response.streaming_content])
    runs = json.loads(body)
    assert [r["input"] for r in runs] == [f"q{i}" for i in range(actions.CHUNK + 7)]
    assert runs[0]["messages"][1]["content"] == "a0"


def test_names_and_messages_are_inert_html_in_the_admin(root, alice):
    agent = Agent.objects.create(name=XSS, model=XSS, instructions="")
    session = Session.objects.create(user=alice, agent=agent, session_name=XSS)
    run = stored_run(session, XSS, XSS)
    LLMCall.objects.filter(run=run).update(sent_messages=[{"role": "user", "content": XSS}])
    pages = [
        "/admin/sessions_app/session/",
        f"/admin/sessions_app/session/{session.session_id}/change/",
        "/admin/sessions_app/run/",
        f"/admin/sessions_app/run/{run.run_id}/change/",
        "/admin/sessions_app/message/",
        "/admin/sessions_app/llmcall/",
        f"/admin/sessions_app/llmcall/{run.llm_calls.get().pk}/change/",
        "/admin/sessions_app/agent/",
    ]
    for path in pages:
        page = root.get(path).content.decode()
        assert "<script>alert" not in page, path
        assert "<img src=x" not in page, path


def _queries(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return len(captured)


@pytest.mark.parametrize(
    "path",
    [
        "/admin/sessions_app/session/",
        "/admin/sessions_app/run/",
        "/admin/sessions_app/message/",
        "/admin/sessions_app/llmcall/",
        "/admin/sessions_app/user/",
        "/admin/sessions_app/agent/",
    ],
)
def test_a_list_costs_the_same_queries_for_three_rows_or_thirty(root, alice, helper_agent, path):
    def grow(n: int) -> None:
        for i in range(n):
            session = Session.objects.create(user=alice, agent=helper_agent, session_name=f"s{i}")
            stored_run(session, f"q{i}", f"a{i}")

    grow(3)
    few = _queries(root, path)
    grow(27)
    assert _queries(root, path) == few
    # The run list reads its page's live scores too, in one query (13 on PostgreSQL).
    assert few <= 13


def test_a_session_page_costs_the_same_queries_for_three_runs_or_thirty(root, conversation):
    path = f"/admin/sessions_app/session/{conversation.session_id}/change/"
    few = _queries(root, path)
    for i in range(27):
        stored_run(conversation, f"more {i}", f"answer {i}")
    assert _queries(root, path) == few
    assert few <= 14


def test_a_long_session_is_read_a_page_of_runs_at_a_time(root, conversation):
    for i in range(110):
        stored_run(conversation, f"more {i}", f"answer {i}")
    path = f"/admin/sessions_app/session/{conversation.session_id}/change/"
    first = root.get(path).content.decode()
    assert first.count('data-testid="transcript-run"') == 100
    assert "Runs 1–100 of 113" in first
    second = root.get(path + "?transcript=2").content.decode()
    assert second.count('data-testid="transcript-run"') == 13 and "more 109" in second


def test_title_and_summary_calls_show_beside_the_transcript(root, conversation):
    LLMCall.objects.create(
        session=conversation,
        user=conversation.user,
        kind=CallKind.TITLE,
        model="scripted",
        total_tokens=7,
        duration=0.3,
        created_at=timezone.now() - timedelta(minutes=1),
    )
    page = root.get(f"/admin/sessions_app/session/{conversation.session_id}/change/")
    assert "Other model calls" in page.content.decode()
    assert ">title<" in page.content.decode()


def test_runs_drill_down_by_year_month_and_day(root, conversation):
    from datetime import datetime

    stamps = {1: datetime(2024, 11, 3, tzinfo=UTC), 2: datetime(2025, 2, 10, tzinfo=UTC)}
    for position, at in stamps.items():
        Run.objects.filter(session=conversation, position=position).update(created_at=at)
    Run.objects.filter(session=conversation, position=3).update(
        created_at=datetime(2025, 2, 12, tzinfo=UTC)
    )
    years = root.get("/admin/sessions_app/run/").content.decode()
    assert "created_at__year=2024" in years and "created_at__year=2025" in years
    months = root.get("/admin/sessions_app/run/?created_at__year=2025").content.decode()
    assert "created_at__month=2" in months and "created_at__month=1&" not in months
    days = root.get("/admin/sessions_app/run/?created_at__year=2025&created_at__month=2")
    page = days.content.decode()
    assert "created_at__day=10" in page and "created_at__day=11" in page
    assert "created_at__day=12" in page
    assert {r.position for r in days.context["cl"].result_list} == {2, 3}


def test_staff_without_permission_to_read_runs_see_no_dashboard(django_user_model):
    bare = django_user_model.objects.create_user("bare", password="x", is_staff=True)
    client = Client()
    client.force_login(bare)
    assert client.get("/admin/dashboard/").status_code == 403
    assert client.get("/admin/dashboard/?csv=top_users").status_code == 403
    assert "/admin/dashboard/" not in client.get("/admin/").content.decode()


def token_form(expires_at=None, name: str = "laptop") -> dict[str, str]:
    """The token's change form as the admin's date and time boxes post it."""
    if expires_at is None:
        return {"name": name, "expires_at_0": "", "expires_at_1": ""}
    local = timezone.localtime(expires_at)
    return {
        "name": name,
        "expires_at_0": local.strftime("%Y-%m-%d"),
        "expires_at_1": local.strftime("%H:%M:%S"),
    }


def test_staff_may_bring_a_token_s_expiry_forward_but_not_push_it_back_or_remove_it(root, alice):
    expires = (timezone.now() + timedelta(days=30)).replace(microsecond=0)
    token, _ = create_token(alice, "laptop", expires_at=expires)
    url = f"/admin/sessions_app/apitoken/{token.pk}/change/"

    for later in (expires + timedelta(days=365), None):
        response = root.post(url, token_form(later))
        assert response.status_code == 200  # the form again, with the error on the field
        errors = response.context["adminform"].form.errors
        assert list(errors) == ["expires_at"], errors
        token.refresh_from_db()
        assert token.expires_at == expires

    sooner = expires - timedelta(days=29)
    assert root.post(url, token_form(sooner)).status_code == 302
    token.refresh_from_db()
    assert token.expires_at == sooner


def test_staff_may_set_an_expiry_on_a_token_that_had_none(root, alice):
    token, _ = create_token(alice, "laptop")
    url = f"/admin/sessions_app/apitoken/{token.pk}/change/"
    assert root.post(url, token_form(None, name="renamed")).status_code == 302
    token.refresh_from_db()
    assert (token.name, token.expires_at) == ("renamed", None)

    expires = (timezone.now() + timedelta(days=7)).replace(microsecond=0)
    assert root.post(url, token_form(expires)).status_code == 302
    token.refresh_from_db()
    assert token.expires_at == expires
