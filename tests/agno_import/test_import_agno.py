"""`manage.py import_agno`: sessions that Agno itself stored (2.x, run here against the scripted
upstream; 1.x, from the committed fixture) come into Parley as Agno has them, once."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agno.db.postgres import PostgresDb
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from pytest_django.asserts import assertContains

from sessions_app.agno_import import import_agno as import_agno_service
from sessions_app.models import (
    Agent,
    ImportedIdentity,
    LLMCall,
    Message,
    Run,
    Session,
    SessionSource,
    User,
)
from sessions_app.usage import dashboard
from sessions_app.usage.dashboard import Scope
from sessions_app.usage.rollups import fill
from sessions_app.usage.rollups.days import DAY_LOCKS
from testkit.upstream import Reply
from tests.conftest import database_url_for_subprocess
from tests.support import agno2_db
from tests.support.apiclient import api_client, asgi_client
from tests.support.asgiclient import ASGIClient

pytestmark = pytest.mark.django_db

AGNO1_DB = Path(__file__).parent / "fixtures" / "agno1" / "agno1_sessions.sqlite"


@pytest.fixture(scope="session")
def agno2_built(upstream_server, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("agno2") / "agno.db"
    agno2_db.build(agno2_db.sqlite(path), upstream_server)
    upstream_server.reset(counters=True)
    return path


@pytest.fixture
def agno2(agno2_built, tmp_path) -> Path:
    """A copy of the Agno 2.x database for one test to import (and change)."""
    return Path(shutil.copy(agno2_built, tmp_path / "agno.db"))


def import_agno(*args: str) -> str:
    out = io.StringIO()
    call_command("import_agno", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def everything() -> dict[str, list[dict[str, Any]]]:
    """Every row an import could write, to compare before and after."""
    models = {"sessions": Session, "runs": Run, "messages": Message, "calls": LLMCall}
    found = {name: list(model.objects.order_by("pk").values()) for name, model in models.items()}
    found["users"] = list(User.objects.order_by("pk").values("username", "is_active", "password"))
    found["agents"] = list(Agent.objects.order_by("pk").values())
    return found


NEW_ALICE_AND_BOB = """Users (Agno user id -> Parley account):
  alice -> agno:alice (new account, inactive)
  bob -> agno:bob (new account, inactive)
"""


def when(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def tool_calls_in_parley(run: Run) -> list[tuple[str, str, dict, str]]:
    messages = list(run.messages.order_by("order"))
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    return [
        (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]),
         results[call["id"]])
        for m in messages if m.role == "assistant" and m.tool_calls
        for call in m.tool_calls
    ]  # fmt: skip


def own_turn(messages: list[Any]) -> list[tuple[str, str]]:
    """The run's own messages as Agno stored them: no history copies, no system prompt."""
    return [
        (m.role, m.content or "")
        for m in messages
        if not m.from_history and m.role in ("user", "assistant", "tool")
    ]


# -- Agno 2.x ----------------------------------------------------------------------------------


def test_every_run_comes_in_as_agno_stored_it(agno2):
    report = import_agno("--db", str(agno2))

    assert_as_agno_stored(agno2_db.stored_sessions(agno2_db.sqlite(agno2)))
    weather = Run.objects.get(session_id="fixed_id_for_demo", position=2)
    assert tool_calls_in_parley(weather) == [
        ("call_1", "weather", {"city": "Rome"}, "Sunny in Rome")
    ]
    assert "team_1: a team session" in report


def assert_as_agno_stored(stored: list[Any]) -> None:
    assert {"fixed_id_for_demo", "session_101"} < {s.session_id for s in stored}
    assert len(stored) == 3
    for agno in stored:
        session = Session.objects.select_related("user", "agent").get(pk=agno.session_id)
        assert session.source == SessionSource.AGNO
        assert session.user.username == f"agno:{agno.user_id}"
        assert session.agent.name == agno.agent_data["name"]
        assert session.agent.model == "scripted"
        assert session.session_state == agno.session_data["session_state"]
        assert session.created_at == when(agno.created_at)
        runs = list(session.runs.order_by("position"))
        assert len(runs) == len(agno.runs)
        for run, theirs in zip(runs, agno.runs, strict=True):
            assert run.run_id == uuid.UUID(theirs.run_id)
            assert (run.input, run.content) == (theirs.input.input_content, theirs.content)
            assert run.status == getattr(theirs.status, "value", theirs.status) == "COMPLETED"
            assert run.created_at == when(theirs.created_at)
            assert (run.model, run.model_provider) == (theirs.model, theirs.model_provider)
            assert run.session_state == theirs.session_state
            metrics = theirs.metrics
            assert (run.input_tokens, run.output_tokens, run.total_tokens) == (
                metrics.input_tokens, metrics.output_tokens, metrics.total_tokens,
            )  # fmt: skip
            assert run.duration == metrics.duration
            assert run.time_to_first_token == metrics.time_to_first_token
            mine = [(m.role, m.content) for m in run.messages.order_by("order")]
            assert mine == own_turn(theirs.messages)
            agno_tools = [
                (t.tool_call_id, t.tool_name, t.tool_args, t.result) for t in theirs.tools or []
            ]
            assert tool_calls_in_parley(run) == agno_tools


@pytest.fixture
def agno2_postgres(upstream_server) -> Iterator[tuple[str, Any]]:
    """Agno's own PostgreSQL store (schema `ai`, as Agno makes it) in the test database."""
    if connection.vendor != "postgresql":
        pytest.skip("Agno's PostgreSQL store is tested when the tests run on PostgreSQL")
    url = database_url_for_subprocess()
    store = PostgresDb(db_url=url.replace("postgres://", "postgresql+psycopg://", 1))
    agno2_db.build(store, upstream_server)
    upstream_server.reset(counters=True)
    yield url, store
    store.db_engine.dispose()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP SCHEMA ai CASCADE")


def test_a_postgresql_store_is_read_like_a_sqlite_one(agno2_postgres):
    url, store = agno2_postgres
    err = io.StringIO()
    out = io.StringIO()
    call_command("import_agno", "--db", url, stdout=out, stderr=err)

    assert "Agno 2.x table ai.agno_sessions: 4 sessions read." in out.getvalue()
    source = re.search(r"Source \(see --source\): (.*)", out.getvalue())[1]
    assert re.fullmatch(r"postgresql://[^:@]+:\d+/\w+#ai\.agno_sessions", source)  # no password
    assert "4/4" in err.getvalue()  # the progress bar
    assert_as_agno_stored(agno2_db.stored_sessions(store))
    assert "3 unchanged" in import_agno("--db", url.replace("postgres://", "postgresql://", 1))


def test_state_summary_users_and_agents_are_kept(agno2):
    report = import_agno("--db", str(agno2))

    bobs = Session.objects.get(pk="session_101")
    assert bobs.session_name == "Plan a trip."  # Agno kept no name: its first message, as here
    assert bobs.session_state == {"destination": "Rome"}
    assert bobs.summary["summary"] == "Bob plans a trip to Rome in May."
    assert bobs.summary["topics"] == ["travel"]
    alices = set(Session.objects.filter(user__username="agno:alice").values_list("pk", flat=True))
    made_by_agno = (alices - {"fixed_id_for_demo"}).pop()
    assert str(uuid.UUID(made_by_agno)) == made_by_agno
    for name in ("agno:alice", "agno:bob"):
        user = User.objects.get(username=name)
        assert not user.is_active
        assert not user.has_usable_password()
    assert NEW_ALICE_AND_BOB in report
    assert Agent.objects.get(name="Weatherbot").instructions == ""
    assert "Imported 3 new sessions, 0 grown (new runs only), 0 unchanged: 6 runs, " in report
    assert "Skipped 1: 1 team sessions" in report


def test_a_second_import_changes_nothing(agno2):
    import_agno("--db", str(agno2))
    before = everything()

    report = import_agno("--db", f"sqlite:///{agno2}")

    assert everything() == before
    assert "Imported 0 new sessions, 0 grown (new runs only), 3 unchanged: 0 runs, 0 messages" in (
        report
    )


def test_a_session_that_grew_in_agno_gains_only_its_new_run(agno2, upstream_server):
    import_agno("--db", str(agno2))
    before = everything()
    agno2_db.add_turn(agno2_db.sqlite(agno2), upstream_server)

    report = import_agno("--db", str(agno2))

    assert "0 new sessions, 1 grown (new runs only), 2 unchanged: 1 runs, 2 messages" in report
    after = everything()
    assert all(run in after["runs"] for run in before["runs"])
    assert all(message in after["messages"] for message in before["messages"])
    newest = Run.objects.get(session_id="fixed_id_for_demo", position=4)
    assert (newest.input, newest.content) == ("And now?", "Still sunny.")
    assert [m.role for m in newest.messages.order_by("order")] == ["user", "assistant"]


def test_existing_users_named_for_agno_ids_own_their_sessions_and_the_api_shows_them(agno2, alice):
    import_agno("--db", str(agno2), "--map-user", "alice=alice")

    client = api_client(alice)
    runs = client.get("/api/sessions/fixed_id_for_demo/runs").json()["data"]
    assert [r["input"] for r in runs] == ["hi", "What is the weather in Rome?", "Thanks!"]
    messages = client.get("/api/sessions/fixed_id_for_demo/messages").json()["data"]
    assert [m["role"] for m in messages] == [
        "user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant",
    ]  # fmt: skip
    assert client.get("/api/sessions/session_101").status_code == 404  # Bob's
    User.objects.get(username="alice", is_active=True)


def imported_for_active_alice(path: Path) -> tuple[Agent, ASGIClient]:
    alice = User.objects.create_user("alice", password="alice-pass-123")
    import_agno("--db", str(path), "--map-user", "alice=alice")
    return Agent.objects.get(name="Weatherbot"), asgi_client(alice)


@pytest.mark.django_db(transaction=True)
async def test_imported_agents_are_not_offered_but_their_sessions_go_on(agno2, agent, upstream):
    weatherbot, as_alice = await sync_to_async(imported_for_active_alice)(agno2)
    carol = await User.objects.acreate(username="carol", is_active=True)
    as_carol = await sync_to_async(asgi_client)(carol)

    for client in (as_alice, as_carol):
        listed = (await client.get("/api/agents")).json()["data"]
        assert [a["name"] for a in listed] == [agent.name]
    assert (await as_carol.get(f"/api/agents/{weatherbot.pk}")).status_code == 404
    refused = await as_carol.post("/api/sessions", {"agent_id": str(weatherbot.pk)})
    assert refused.status_code == 404
    picker = await sync_to_async(new_chat_page)(carol)
    assert agent.name in picker and "Weatherbot" not in picker

    upstream.script(Reply("Still sunny in Rome."))
    ran = await as_alice.post("/api/runs", {"input": "And now?", "session_id": "fixed_id_for_demo"})
    assert ran.status_code == 200
    assert (ran.json()["agent_id"], ran.json()["content"]) == (
        str(weatherbot.pk),
        "Still sunny in Rome.",
    )
    assert (await as_alice.get(f"/api/agents/{weatherbot.pk}")).json()["name"] == "Weatherbot"


def test_an_imported_agent_is_never_the_default_for_a_new_session(agno2, alice):
    Agent.objects.all().delete()  # a server whose first agents came from Agno
    import_agno("--db", str(agno2))
    offered = Agent.objects.create(name="Made here", model="scripted")  # none is the default
    alice.is_active = True
    alice.save()

    created = api_client(alice).post("/api/sessions", {}, content_type="application/json")

    assert created.status_code == 201
    assert created.json()["agent_id"] == str(offered.pk)


def new_chat_page(user: User) -> str:
    browser = Client()
    browser.force_login(user)
    return browser.get("/").content.decode()


def test_the_admin_filters_imported_sessions(agno2, django_user_model, alice, agent):
    Session.objects.create(user=alice, agent=agent, session_name="Made here")
    import_agno("--db", str(agno2))
    root = django_user_model.objects.create_superuser("root", password="root-pass-123")
    admin = Client()
    admin.force_login(root)

    imported = admin.get("/admin/sessions_app/session/", {"source__exact": "agno"})
    made_here = admin.get("/admin/sessions_app/session/", {"source__exact": "parley"})

    assert imported.status_code == made_here.status_code == 200
    assert "fixed_id_for_demo" in imported.content.decode()
    assert "Made here" not in imported.content.decode()
    assert "Made here" in made_here.content.decode()
    assert "Agno import" in admin.get("/admin/sessions_app/session/").content.decode()
    unlisted = admin.get("/admin/sessions_app/agent/", {"listed__exact": "0"}).content.decode()
    assert "Weatherbot" in unlisted and agent.name not in unlisted


def move_to(path: Path, day: datetime) -> None:
    """Every time in the Agno database moved to `day`, as if Agno had run then."""
    epoch = int(day.timestamp())
    with sqlite3.connect(path) as db:
        for session_id, runs in db.execute("SELECT session_id, runs FROM agno_sessions").fetchall():
            decoded = json.loads(json.loads(runs))
            for run in decoded:
                run["created_at"] = epoch
                for message in run.get("messages") or []:
                    message["created_at"] = epoch
            db.execute(
                "UPDATE agno_sessions SET runs = ?, created_at = ?, updated_at = ? "
                "WHERE session_id = ?",
                (json.dumps(json.dumps(decoded)), epoch, epoch, session_id),
            )


def test_the_dashboard_counts_imported_runs_on_the_days_they_happened(agno2):
    move_to(agno2, datetime(2025, 3, 10, 12, tzinfo=UTC))
    fill([date(2025, 3, 10), date(2025, 3, 11)])  # rolled up before the import: nothing then

    import_agno("--db", str(agno2))

    scope = Scope(
        start=datetime(2025, 3, 10, tzinfo=UTC),
        end=datetime(2025, 3, 12, tzinfo=UTC),
        rolled_until=date(2025, 3, 20),
    )
    charts = dashboard.build(scope).charts
    assert {d["key"]: d["data"] for d in charts["runs_by_status"]["datasets"]} == {
        "COMPLETED": [6, 0]
    }
    tokens = sum(Run.objects.values_list("total_tokens", flat=True))
    by_model = {d["key"]: d["data"] for d in charts["tokens_by_model"]["datasets"]}
    assert sum(by_model["model:scripted"]) > 0
    assert sum(LLMCall.objects.values_list("total_tokens", flat=True)) <= tokens


def completed_runs_on_march_10() -> int:
    scope = Scope(
        start=datetime(2025, 3, 10, tzinfo=UTC),
        end=datetime(2025, 3, 11, tzinfo=UTC),
        rolled_until=date(2025, 3, 20),
    )
    datasets = dashboard.build(scope).charts["runs_by_status"]["datasets"]
    return sum(sum(d["data"]) for d in datasets if d["key"] == "COMPLETED")


def interrupted_after(sessions: int, then: Any = None) -> Any:
    """A progress callback that stops the import (as Ctrl-C does) once `sessions` rows are
    through, or calls `then` between rows."""

    def progress(rows: Any, total: int) -> Iterator[dict[str, Any]]:
        for n, row in enumerate(rows):
            if n == sessions:
                if then is None:
                    raise KeyboardInterrupt
                then()
            yield row

    return progress


def test_runs_stored_before_an_interrupted_import_are_counted_on_rolled_up_days(agno2):
    move_to(agno2, datetime(2025, 3, 10, 12, tzinfo=UTC))
    fill([date(2025, 3, 10)])

    with pytest.raises(KeyboardInterrupt):
        import_agno_service(str(agno2), progress=interrupted_after(1))

    stored = Run.objects.count()
    assert stored > 0
    assert completed_runs_on_march_10() == stored
    import_agno("--db", str(agno2))
    assert completed_runs_on_march_10() == Run.objects.count() == 6


def test_a_day_rolled_up_during_an_import_counts_each_run_once(agno2):
    move_to(agno2, datetime(2025, 3, 10, 12, tzinfo=UTC))

    import_agno_service(
        str(agno2), progress=interrupted_after(2, then=lambda: fill([date(2025, 3, 10)]))
    )

    assert Run.objects.count() == 6
    assert completed_runs_on_march_10() == 6


def in_thread(work: Any) -> threading.Thread:
    def run() -> None:
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def until_waiting_on(day: date, waiters: int) -> None:
    """Until `waiters` transactions wait for the day's lock (bounded, so a missing lock fails)."""
    with psycopg.connect(database_url_for_subprocess(), autocommit=True) as db:
        for _ in range(600):
            found = db.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND classid = %s AND objid = %s",
                [DAY_LOCKS, day.toordinal()],
            ).fetchone()[0]
            if found >= waiters:
                return
            time.sleep(0.1)
    pytest.fail(f"{waiters} waiter(s) on the lock of {day} never came")


@pytest.mark.django_db(transaction=True)
def test_rolling_a_day_up_waits_for_an_import_adding_to_it(agno2):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite lets one transaction write at a time")
    day = date(2025, 3, 10)
    move_to(agno2, datetime(2025, 3, 10, 12, tzinfo=UTC))
    with psycopg.connect(database_url_for_subprocess(), autocommit=True) as held:
        # The day's lock held from outside, so both sides are mid-transaction when it opens.
        held.execute("SELECT pg_advisory_lock(%s, %s)", [DAY_LOCKS, day.toordinal()])
        filling = in_thread(lambda: fill([day]))
        until_waiting_on(day, 1)
        importing = in_thread(lambda: import_agno("--db", str(agno2)))
        until_waiting_on(day, 2)
        held.execute("SELECT pg_advisory_unlock(%s, %s)", [DAY_LOCKS, day.toordinal()])
        filling.join()
        importing.join()

    assert Run.objects.count() == 6
    assert completed_runs_on_march_10() == 6


def test_a_dry_run_reports_and_writes_nothing(agno2):
    report = import_agno("--db", str(agno2), "--dry-run")

    assert "Would import 3 new sessions" in report
    assert NEW_ALICE_AND_BOB in report
    assert "Dry run: nothing was written." in report
    assert not Session.objects.exists()
    assert not User.objects.exists()


def test_since_leaves_out_sessions_not_updated_since(agno2):
    report = import_agno("--db", str(agno2), "--since", "2999-01-01")

    assert "Skipped 4: 3 not updated since --since, 1 team sessions" in report
    assert not Session.objects.exists()


# -- rows that cannot come in -----------------------------------------------------------------


def add_row(path: Path, **values: Any) -> None:
    row = {"session_type": "agent", "agent_id": "weather-agent", "created_at": 1, **values}
    columns = ", ".join(row)
    with sqlite3.connect(path) as db:
        db.execute(
            f"INSERT INTO agno_sessions ({columns}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )


def test_malformed_rows_are_reported_by_id_and_skipped_whole(agno2):
    good_run = {"run_id": str(uuid.uuid4()), "created_at": 1, "content": "fine", "messages": []}
    add_row(agno2, session_id="bad_json", user_id="carol", runs='[{"run_id": ')
    add_row(agno2, session_id="no_user", runs="[]")
    add_row(agno2, session_id="half_good", user_id="carol", runs=json.dumps([good_run, {}]))
    add_row(agno2, session_id="has space", user_id="carol", runs="[]")
    add_row(agno2, session_id="flow_1", session_type="workflow", user_id="carol", runs="[]")

    report = import_agno("--db", str(agno2))

    assert "  bad_json: bad JSON in runs" in report
    assert "  no_user: no user_id (or longer than 150 characters)" in report
    assert "  half_good: a run without run_id" in report
    assert "  has space: session_id is not letters, digits and ._:- (up to 128 characters)" in (
        report
    )
    assert "  flow_1: a workflow session" in report
    assert "Imported 3 new sessions" in report
    assert not Session.objects.filter(pk__in=["bad_json", "no_user", "half_good"]).exists()
    assert not Run.objects.filter(pk=good_run["run_id"]).exists()
    assert not User.objects.filter(username="agno:carol").exists()


def test_an_id_taken_by_a_session_made_here_is_reported_and_left_alone(agno2, alice, agent):
    Session.objects.create(session_id="session_101", user=alice, agent=agent, session_name="Mine")

    report = import_agno("--db", str(agno2))

    assert "  session_101: a Parley session has this id already" in report
    assert Session.objects.get(pk="session_101").session_name == "Mine"
    assert not Run.objects.filter(session_id="session_101").exists()


def test_a_user_id_that_cannot_be_a_username_is_reported_and_skipped(agno2, alice):
    add_row(agno2, session_id="spaced", user_id="carol smith", runs="[]")

    report = import_agno("--db", str(agno2))

    assert "  spaced: 'agno:carol smith' cannot be a username: Enter a valid username." in report
    assert "(see --map-user)" in report
    assert "1 not usable as usernames" in report
    assert not Session.objects.filter(pk="spaced").exists()
    assert not User.objects.filter(username="agno:carol smith").exists()
    import_agno("--db", str(agno2), "--map-user", "carol smith=alice")
    assert Session.objects.get(pk="spaced").user == alice


def test_a_user_prefix_keeps_imported_users_apart(agno2, alice, django_user_model):
    django_user_model.objects.create_superuser("admin", password="root-pass-123")
    add_row(agno2, session_id="admins_chat", user_id="admin", runs="[]")

    report = import_agno("--db", str(agno2), "--user-prefix", "agno-")

    assert "  admin -> agno-admin (new account, inactive)" in report
    assert "  alice -> agno-alice (new account, inactive)" in report
    assert Session.objects.get(pk="fixed_id_for_demo").user.username == "agno-alice"
    assert Session.objects.get(pk="admins_chat").user.username == "agno-admin"
    assert not Session.objects.filter(user=alice).exists()
    with pytest.raises(CommandError, match="--user-prefix 'agno '"):
        import_agno("--db", str(agno2), "--user-prefix", "agno ")


def test_a_missing_database_or_table_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="No SQLite file at"):
        import_agno("--db", str(tmp_path / "nothing.db"))
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(CommandError, match="No Agno sessions table found"):
        import_agno("--db", str(tmp_path / "empty.db"))


def test_an_unsupported_url_is_named_without_its_password():
    with pytest.raises(CommandError) as raised:
        import_agno("--db", "mysql+pymysql://reader:s3cret-pw@db.example/agno")

    assert "Unsupported database URL 'mysql+pymysql://reader:***@db.example/agno'" in str(
        raised.value
    )
    assert "s3cret-pw" not in str(raised.value)
    with pytest.raises(CommandError) as raised:
        import_agno("--db", "postgresql+psycopg://reader:s3cret%zz-pw@127.0.0.1/agno")

    assert "Cannot connect to postgresql+psycopg://reader:***@127.0.0.1/agno" in str(raised.value)
    assert "s3cret" not in str(raised.value)


# -- whose sessions they are ---------------------------------------------------------------------

PASSWORD = "correct-horse-battery"


def sign_up(client: Client, username: str) -> HttpResponse:
    return client.post(
        "/accounts/signup/", {"username": username, "password1": PASSWORD, "password2": PASSWORD}
    )


def signs_in_by_email(path: Path) -> None:
    """Agno's `alice` is `alice@example.com` there, as an application using e-mails as ids has."""
    with sqlite3.connect(path) as db:
        db.execute("UPDATE agno_sessions SET user_id = 'alice@example.com' WHERE user_id = 'alice'")


def test_a_look_alike_who_signed_up_first_receives_nothing(agno2, client):
    signs_in_by_email(agno2)
    assert sign_up(client, "alice@example.com").status_code == 302
    look_alike = User.objects.get(username="alice@example.com")

    report = import_agno("--db", str(agno2))

    owner = Session.objects.get(pk="fixed_id_for_demo").user
    assert owner.username == "agno:alice@example.com"
    assert not owner.is_active and not owner.has_usable_password()
    assert "  alice@example.com -> agno:alice@example.com (new account, inactive)" in report
    assert not Run.objects.filter(user=look_alike).exists()
    assert client.get("/api/sessions").json()["data"] == []  # the look-alike, signed in
    assert client.get("/api/sessions/fixed_id_for_demo").status_code == 404


def test_no_one_can_sign_up_as_an_imported_account_and_staff_can_activate_one(
    agno2, client, django_user_model
):
    import_agno("--db", str(agno2))

    assertContains(sign_up(client, "agno:carol"), "Enter a valid username.")
    assert not User.objects.filter(username="agno:carol").exists()

    imported = User.objects.get(username="agno:alice")
    root = django_user_model.objects.create_superuser("root", password="root-pass-123")
    admin = Client()
    admin.force_login(root)
    url = f"/admin/sessions_app/user/{imported.pk}/change/"
    assertContains(admin.get(url), 'value="agno:alice"')
    saved = admin.post(url, user_change_form(imported, is_active="on"))
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    imported.refresh_from_db()
    assert imported.is_active and imported.username == "agno:alice"


def user_change_form(user: User, **changes: str) -> dict[str, str]:
    """The admin's change form for `user` as the page fills it, with `changes`."""
    joined = user.date_joined
    return {
        "username": user.username,
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        **changes,
    }


def test_a_later_import_of_the_source_finds_the_account_it_made_even_renamed(
    agno2, upstream_server, django_user_model
):
    import_agno("--db", str(agno2))
    made = User.objects.get(username="agno:alice")
    made.username = "alice.smith"
    made.save()
    look_alike = django_user_model.objects.create_user("agno:alice")  # the name, free again
    agno2_db.add_turn(agno2_db.sqlite(agno2), upstream_server)
    add_row(agno2, session_id="alices_later_chat", user_id="alice", runs="[]")

    report = import_agno("--db", str(agno2))

    assert "1 new sessions, 1 grown (new runs only), 2 unchanged" in report
    assert "  alice -> alice.smith (earlier import)" in report
    assert Session.objects.get(pk="alices_later_chat").user == made
    assert Run.objects.get(session_id="fixed_id_for_demo", position=4).user == made
    assert not Session.objects.filter(user=look_alike).exists()


def test_a_new_account_whose_name_is_taken_gets_a_suffix(agno2, django_user_model):
    taken = django_user_model.objects.create_user("AGNO:alice")  # case aside, as sign-up compares

    report = import_agno("--db", str(agno2))

    assert "  alice -> agno:alice-2 (new account, inactive)" in report
    assert Session.objects.get(pk="fixed_id_for_demo").user.username == "agno:alice-2"
    assert not Session.objects.filter(user=taken).exists()


def test_map_user_gives_the_sessions_to_the_named_account_from_then_on(
    agno2, alice, upstream_server
):
    dry = import_agno("--db", str(agno2), "--map-user", "alice=alice", "--dry-run")

    assert "  alice -> alice (mapped)\n  bob -> agno:bob (new account, inactive)\n" in dry
    assert not Session.objects.exists()
    report = import_agno("--db", str(agno2), "--map-user", "alice=alice")
    assert "  alice -> alice (mapped)" in report
    assert Session.objects.filter(user=alice).count() == 2
    assert Session.objects.get(pk="session_101").user.username == "agno:bob"

    agno2_db.add_turn(agno2_db.sqlite(agno2), upstream_server)
    dry = import_agno("--db", str(agno2), "--dry-run")
    assert "  alice -> alice (earlier import)\n  bob -> agno:bob (earlier import)\n" in dry
    import_agno("--db", str(agno2))
    assert Run.objects.get(session_id="fixed_id_for_demo", position=4).user == alice


def test_a_csv_file_maps_users(agno2, alice, bob, tmp_path):
    csv = tmp_path / "users.csv"
    # As a spreadsheet saves it: a byte-order mark, a header, CRLF, a blank row, spaces.
    csv.write_text("\ufeffagno_id,username\r\nalice,bob\r\n\r\n bob , alice\r\n")

    report = import_agno("--db", str(agno2), "--map-users", str(csv))

    assert "  alice -> bob (mapped)\n  bob -> alice (mapped)\n" in report
    assert Session.objects.get(pk="fixed_id_for_demo").user == bob
    assert Session.objects.get(pk="session_101").user == alice


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--map-user", "a=alice", "--map-user", "b=nobody"], "No Parley account named 'nobody'."),
        (["--map-user", "alice"], "--map-user 'alice': give it as AGNO_ID=USERNAME."),
        (["--map-user", "a=alice", "--map-user", "a=bob"], "mapped to both 'alice' and 'bob'"),
        (["--map-users", "{tmp}/missing.csv"], "--map-users {tmp}/missing.csv: No such file"),
        (["--map-users", "{tmp}/bad.csv"], "{tmp}/bad.csv line 2: expected two columns"),
    ],
)  # fmt: skip
def test_a_mapping_that_cannot_be_used_is_an_error_before_anything_is_written(
    agno2, alice, bob, tmp_path, args, error
):
    (tmp_path / "bad.csv").write_text("alice,alice\nbob;bob\n")
    before = everything()

    with pytest.raises(CommandError) as raised:
        import_agno("--db", str(agno2), *[arg.format(tmp=tmp_path) for arg in args])

    assert error.format(tmp=tmp_path) in str(raised.value)
    assert everything() == before
    assert not ImportedIdentity.objects.exists()


def test_a_staff_account_gets_sessions_only_when_named_and_allowed(agno2, django_user_model):
    root = django_user_model.objects.create_superuser("admin", password="root-pass-123")
    add_row(agno2, session_id="admins_chat", user_id="admin", runs="[]")

    dry = import_agno("--db", str(agno2), "--dry-run", "--allow-staff-users")
    assert "  admin -> agno:admin (new account, inactive)" in dry  # never by its name
    with pytest.raises(CommandError, match="'admin' is a staff account: add --allow-staff-users"):
        import_agno("--db", str(agno2), "--map-user", "admin=admin")
    assert not Session.objects.exists()

    import_agno("--db", str(agno2), "--map-user", "admin=admin", "--allow-staff-users")
    assert Session.objects.get(pk="admins_chat").user == root
    add_row(agno2, session_id="admins_second_chat", user_id="admin", runs="[]")
    report = import_agno("--db", str(agno2))  # remembered, but not allowed this time
    assert (
        "  admins_second_chat: Agno user 'admin' has the staff account 'admin' since an earlier "
        "import (see --allow-staff-users)"
    ) in report
    assert not Session.objects.filter(pk="admins_second_chat").exists()


def test_a_source_is_known_by_the_name_given_wherever_it_is(agno2, tmp_path):
    report = import_agno("--db", str(agno2), "--source", "team-agno")
    assert "Source (see --source): team-agno" in report
    moved = Path(shutil.move(agno2, tmp_path / "moved.db"))

    again = import_agno("--db", str(moved), "--source", "team-agno")

    assert "0 new sessions, 0 grown (new runs only), 3 unchanged" in again
    assert "  alice -> agno:alice (earlier import)" in again
    elsewhere = import_agno("--db", str(moved))
    assert f"Source (see --source): sqlite:///{moved.resolve()}#agno_sessions" in elsewhere
    assert (
        "  fixed_id_for_demo: imported before for 'agno:alice', not 'agno:alice-2' (see --map-user)"
    ) in elsewhere


# -- Agno 1.x ----------------------------------------------------------------------------------


def agno1_sessions() -> list[dict[str, Any]]:
    with sqlite3.connect(AGNO1_DB) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM agent_sessions")]
    for row in rows:
        for column in ("memory", "session_data", "agent_data"):
            row[column] = json.loads(row[column]) if row[column] else None
    return rows


def test_agno_1_sessions_come_in_from_their_memory(tmp_path):
    copy = Path(shutil.copy(AGNO1_DB, tmp_path / "agno1.db"))
    report = import_agno("--db", str(copy))

    assert "Agno 1.x table agent_sessions" in report
    stored = agno1_sessions()
    assert {row["user_id"] for row in stored} == {"alice", "bob"}
    for row in stored:
        session = Session.objects.get(pk=row["session_id"])
        assert session.user.username == f"agno:{row['user_id']}"
        assert session.session_state == row["session_data"]["session_state"]
        runs = list(session.runs.order_by("position"))
        assert len(runs) == len(row["memory"]["runs"])
        for run, theirs in zip(runs, row["memory"]["runs"], strict=True):
            assert run.run_id == uuid.UUID(theirs["run_id"])
            assert run.content == theirs["content"]
            assert run.status == "COMPLETED"
            assert run.input_tokens == sum(theirs["metrics"]["input_tokens"])
            assert run.output_tokens == sum(theirs["metrics"]["output_tokens"])
            assert run.duration == pytest.approx(sum(theirs["metrics"]["time"]))
            own = [
                (m["role"], m.get("content") or "")
                for m in theirs["messages"]
                if not m.get("from_history") and m["role"] in ("user", "assistant", "tool")
            ]
            assert [(m.role, m.content) for m in run.messages.order_by("order")] == own
            assert run.input == own[0][1]
    weather = Run.objects.get(session_id="fixed_id_for_demo", position=2)
    assert tool_calls_in_parley(weather) == [
        ("call_1", "weather", {"city": "Rome"}, "Sunny in Rome")
    ]
    bobs = Session.objects.get(pk="session_101")
    assert bobs.summary["summary"] == "Bob plans a trip to Rome in May."
    assert bobs.session_state["destination"] == "Rome"

    assert "0 new sessions" in import_agno("--db", str(copy))
