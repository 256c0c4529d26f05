"""The staff metrics dashboard at /admin/dashboard/: who may see it, and every figure on it,
checked against a small fixture whose numbers were worked out by hand."""

from __future__ import annotations

import csv
import html
import io
import re
import threading
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import F, Sum
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_app.models import (
    Agent,
    CallDay,
    CallKind,
    LatencyDay,
    LLMCall,
    RolledDay,
    Run,
    RunDay,
    RunStatus,
    Session,
)
from sessions_app.usage import Scope, dashboard
from sessions_app.usage.rollups import fill
from tests.support.apiclient import api_client

pytestmark = pytest.mark.django_db

URL = "/admin/dashboard/"
# Two days, compared with the two days before (8 and 9 March).
RANGE = "start=2025-03-10&end=2025-03-11"
# Every day of the fixture is closed, so figures come from the daily rollups; LIVE reads rows.
SCOPE = Scope(
    start=datetime(2025, 3, 10, tzinfo=UTC),
    end=datetime(2025, 3, 12, tzinfo=UTC),
    rolled_until=date(2025, 3, 20),
)
LIVE = replace(SCOPE, rolled_until=None)
# Percentiles are read from 2 %-wide buckets (usage.rollups.histogram).
WITHIN = 0.01


def at(day: int, hour: int = 12, minute: int = 0) -> datetime:
    return datetime(2025, 3, day, hour, minute, tzinfo=UTC)


def add_run(session: Session, when: datetime, status: str, duration: float, **fields) -> Run:
    run = Run.objects.create(
        session=session,
        user=session.user,
        agent=session.agent,
        position=session.runs.count() + 1,
        status=status,
        input="question",
        model=session.agent.model,
        duration=duration,
        **fields,
    )
    Run.objects.filter(pk=run.pk).update(created_at=when)  # created_at is set on insert
    return run


def add_call(run: Run, when: datetime, tokens: tuple[int, int], cost: str | None, **fields):
    call = LLMCall.objects.create(
        run=run if fields.get("kind", CallKind.CHAT) == CallKind.CHAT else None,
        session=run.session,
        user=run.user,
        agent=run.agent,
        model=run.model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_tokens=sum(tokens),
        cost=Decimal(cost) if cost is not None else None,
        **fields,
    )
    LLMCall.objects.filter(pk=call.pk).update(created_at=when)


def rate(run: Run, rating: int, when: datetime) -> None:
    Run.objects.filter(pk=run.pk).update(feedback_rating=rating, feedback_at=when)


@pytest.fixture
def usage(alice, bob):
    """Four runs in the range, two in the period before, one just after.

    R6 started on the 9th (before the range) but its call was made on the 10th (in it): tokens
    count on the day of the call. R6 was also rated on the 10th: ratings count on that day.
    """
    assistant = Agent.objects.create(name="Assistant", model="scripted")
    coder = Agent.objects.create(name="Coder", model="big-model")
    s1 = Session.objects.create(user=alice, agent=assistant, session_name="Alpha")
    s2 = Session.objects.create(user=bob, agent=coder, session_name="Beta")
    s3 = Session.objects.create(user=alice, agent=assistant, session_name="Gamma")
    chat = {"kind": CallKind.CHAT}

    r5 = add_run(s3, at(8), RunStatus.COMPLETED, 1.5)
    add_call(r5, at(8), (10, 10), "0.002", time_to_first_token=0.1, duration=1.5, **chat)
    r6 = add_run(s3, at(9, 23, 59), RunStatus.COMPLETED, 0.8)
    add_call(r6, at(10, 0, 1), (20, 2), "0.004", time_to_first_token=0.3, duration=0.8, **chat)

    r1 = add_run(s1, at(10, 9), RunStatus.COMPLETED, 1.0)
    add_call(r1, at(10, 9), (100, 20), "0.010", time_to_first_token=0.2, duration=1.0, **chat)
    add_call(r1, at(10, 9, 1), (30, 5), "0.001", duration=0.3, kind=CallKind.TITLE)
    r2 = add_run(s1, at(10, 15), RunStatus.ERROR, 3.0, error="upstream said no")
    add_call(r2, at(10, 15), (50, 0), "0.005", duration=3.0, ok=False, **chat)
    r3 = add_run(s2, at(11, 8), RunStatus.COMPLETED, 2.0)
    add_call(r3, at(11, 8), (200, 80), "0.250", time_to_first_token=0.4, duration=2.0, **chat)
    add_call(r3, at(11, 8, 5), (60, 10), "0.020", duration=0.5, kind=CallKind.SUMMARY)
    r4 = add_run(s2, at(11, 20), RunStatus.CANCELLED, 0.5)
    add_call(r4, at(11, 20), (40, 4), "0.030", time_to_first_token=0.6, duration=0.5, **chat)

    r7 = add_run(s2, at(12, 0), RunStatus.COMPLETED, 9.0)  # the range's end is exclusive
    add_call(r7, at(12, 0), (1000, 1000), "1.000", time_to_first_token=5.0, duration=9.0, **chat)

    rate(r5, 1, at(9))
    rate(r1, 1, at(10, 10))
    rate(r6, -1, at(10, 12))
    rate(r3, -1, at(11, 9))
    rate(r4, 1, at(11, 21))
    return {"assistant": assistant, "coder": coder, "runs": [r1, r2, r3, r4], "sessions": [s1, s2]}


def staff_client(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def tiles(scope: Scope = SCOPE) -> dict[str, dashboard.Tile]:
    return {tile.key: tile for tile in dashboard.build(scope).tiles}


# -- access ------------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_the_admin_login(client, usage):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_users_who_are_not_staff_get_the_login_and_no_figures(alice, usage):
    client = Client()
    client.force_login(alice)
    for url in (URL, f"{URL}?{RANGE}", f"{URL}?{RANGE}&csv=top_users"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
        assert b"Alpha" not in response.content and b"alice" not in response.content


def test_the_admin_index_links_to_the_dashboard(staff):
    page = staff_client(staff).get("/admin/").content.decode()
    assert f'href="{URL}"' in page


# -- tiles -------------------------------------------------------------------------------------


def test_run_tiles_count_runs_started_in_the_range_beside_the_previous_period(usage):
    found = tiles()
    assert (found["runs"].value, found["runs"].previous, found["runs"].change) == (4, 2, 100.0)
    assert (found["active_users"].value, found["active_users"].previous) == (2, 1)
    assert (found["sessions"].value, found["sessions"].previous) == (2, 1)
    assert (found["error_rate"].value, found["error_rate"].previous) == (0.25, 0.0)
    assert found["error_rate"].change is None  # nothing to compare with a zero
    assert (found["stopped_rate"].value, found["stopped_rate"].previous) == (0.25, 0.0)


def test_token_and_cost_tiles_count_calls_on_their_own_day_with_titles_and_summaries_apart(usage):
    found = tiles()
    tokens_in, tokens_out, cost = found["input_tokens"], found["output_tokens"], found["cost"]
    assert (tokens_in.value, tokens_in.previous) == (500, 10)
    assert dict(tokens_in.parts) == {"chat": 410, "titles & summaries": 90}
    assert tokens_in.change == pytest.approx(4900.0)
    assert (tokens_out.value, tokens_out.previous) == (121, 10)
    assert dict(tokens_out.parts) == {"chat": 106, "titles & summaries": 15}
    assert (cost.value, cost.previous) == (Decimal("0.320"), Decimal("0.002"))
    assert dict(cost.parts) == {"chat": Decimal("0.299"), "titles & summaries": Decimal("0.021")}
    assert cost.change == pytest.approx(15900.0)


def test_latency_tiles_are_percentiles_of_chat_calls(usage):
    found = tiles()
    # Time to first token of chat calls: 0.2, 0.3, 0.4, 0.6 (the failed call has none).
    assert found["time_to_first_token_p50"].value == pytest.approx(0.35, rel=WITHIN)
    assert found["time_to_first_token_p95"].value == pytest.approx(0.57, rel=WITHIN)
    assert found["time_to_first_token_p50"].previous == pytest.approx(0.1, rel=WITHIN)
    assert found["time_to_first_token_p50"].change == pytest.approx(250.0, rel=2 * WITHIN)
    # Durations 0.5, 0.8, 1.0, 2.0, 3.0; the title and summary calls are left out.
    assert found["duration_p50"].value == pytest.approx(1.0, rel=WITHIN)
    assert found["duration_p95"].value == pytest.approx(2.8, rel=WITHIN)
    assert found["duration_p95"].previous == pytest.approx(1.5, rel=WITHIN)


def test_the_thumbs_up_tile_counts_ratings_given_in_the_range(usage):
    found = tiles()["thumbs_up"]
    assert (found.value, found.previous, found.change) == (0.5, 1.0, -50.0)
    assert found.basis == ("ratings", 4)


def test_filters_narrow_every_figure(usage, alice):
    by_agent = tiles(replace(SCOPE, agent_id=usage["coder"].agent_id))
    assert (by_agent["runs"].value, by_agent["input_tokens"].value) == (2, 300)
    assert by_agent["cost"].value == Decimal("0.300")
    by_user = tiles(replace(SCOPE, user_id=alice.pk))
    assert (by_user["runs"].value, by_user["input_tokens"].value, by_user["runs"].previous) == (
        2, 200, 2,
    )  # fmt: skip
    by_model = tiles(replace(SCOPE, model="scripted"))
    assert (by_model["runs"].value, by_model["output_tokens"].value) == (2, 27)
    assert by_model["thumbs_up"].value == 0.5  # R1 up, R6 down


# -- charts ------------------------------------------------------------------------------------


def series(chart: dict) -> dict[str, list]:
    return {d["key"]: d["data"] for d in chart["datasets"]}


def test_each_chart_has_a_value_per_day_of_the_range(usage):
    charts = dashboard.build(SCOPE).charts
    for chart in charts.values():
        assert chart["labels"] == ["2025-03-10", "2025-03-11"]
    assert series(charts["runs_by_status"]) == {
        "COMPLETED": [1, 1], "ERROR": [1, 0], "CANCELLED": [0, 1],
    }  # fmt: skip
    tokens = series(charts["tokens_by_model"])
    assert list(tokens) == ["model:big-model", "model:scripted", "background"]
    assert tokens == {
        "model:big-model": [0, 324], "model:scripted": [192, 0], "background": [35, 70],
    }  # fmt: skip
    first_token = series(charts["first_token"])
    assert first_token["p50"] == pytest.approx([0.25, 0.5], rel=WITHIN)
    assert first_token["p95"] == pytest.approx([0.295, 0.59], rel=WITHIN)
    cost = series(charts["cost_per_day"])
    assert cost["chat"] == pytest.approx([0.019, 0.280])
    assert cost["background"] == pytest.approx([0.001, 0.020])
    assert series(charts["feedback_per_day"]) == {"up": [1, 1], "down": [1, 1]}


def test_the_page_carries_the_charts_data_as_json(staff, usage):
    response = staff_client(staff).get(f"{URL}?{RANGE}")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<script id="dashboard-charts" type="application/json">' in page
    for key in ("runs_by_status", "tokens_by_model", "first_token", "cost_per_day"):
        assert f'data-chart="{key}"' in page
    assert "/static/vendor/chartjs/chart.umd.js" in page


# -- tables ------------------------------------------------------------------------------------


def test_top_tables_rank_by_runs_with_tokens_and_cost_of_all_calls(usage):
    tables = dashboard.build(SCOPE).tables
    users = [(r["user__username"], r["runs"], r["errors"], r["input_tokens"], r["output_tokens"],
              r["cost"]) for r in tables["top_users"]]  # fmt: skip
    assert users == [
        ("alice", 2, 1, 200, 27, Decimal("0.020")), ("bob", 2, 0, 300, 94, Decimal("0.300")),
    ]  # fmt: skip
    agents = [(r["agent__name"], r["runs"], r["input_tokens"]) for r in tables["top_agents"]]
    assert agents == [("Assistant", 2, 200), ("Coder", 2, 300)]
    models = [(r["model"], r["runs"], r["cost"]) for r in tables["top_models"]]
    assert models == [("big-model", 2, Decimal("0.300")), ("scripted", 2, Decimal("0.020"))]


def test_slowest_runs_and_latest_errors(usage):
    r1, r2, r3, r4 = usage["runs"]
    tables = dashboard.build(SCOPE).tables
    assert [r["run_id"] for r in tables["slowest_runs"]] == [r2.pk, r3.pk, r1.pk, r4.pk]
    (error,) = tables["latest_errors"]
    assert (error["run_id"], error["error_text"]) == (r2.pk, "upstream said no")


def test_table_rows_link_into_the_admin(staff, usage, alice):
    page = staff_client(staff).get(f"{URL}?{RANGE}").content.decode()
    r1, r2, *_ = usage["runs"]
    assert f'href="/admin/sessions_app/user/{alice.pk}/change/"' in page
    assert f'href="/admin/sessions_app/agent/{usage["assistant"].pk}/change/"' in page
    link = re.search(r'href="(/admin/sessions_app/run/\?model=big-model[^"]*)"', page).group(1)
    listed = staff_client(staff).get(html.unescape(link)).context["cl"].result_list
    scope = staff_client(staff).get(f"{URL}?{RANGE}").context["scope"]
    in_range = Run.objects.filter(
        model="big-model", created_at__gte=scope.start, created_at__lt=scope.end
    )
    assert {r.pk for r in listed} == set(in_range.values_list("pk", flat=True))
    assert in_range.count() < Run.objects.filter(model="big-model").count()
    assert f'href="/admin/sessions_app/run/{r2.pk}/change/"' in page
    assert f'href="/admin/sessions_app/session/{r1.session_id}/change/"' in page


@pytest.mark.parametrize(
    "name,header,first",
    [
        ("top_users", "User", "alice"),
        ("top_agents", "Agent", "Assistant"),
        ("top_models", "Model", "big-model"),
        ("slowest_runs", "Started", "2025-03-10T15:00:00+00:00"),
        ("latest_errors", "Started", "2025-03-10T15:00:00+00:00"),
    ],
)
def test_each_table_downloads_as_csv(staff, usage, name, header, first):
    response = staff_client(staff).get(f"{URL}?{RANGE}&csv={name}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment;")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][0] == header and rows[1][0] == first
    assert len(rows) == 1 + len(dashboard.build(SCOPE).tables[name])


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted(staff, usage):
    usage["coder"].name = '=HYPERLINK("http://evil")'
    usage["coder"].save()
    response = staff_client(staff).get(f"{URL}?{RANGE}&csv=top_agents")
    cells = [row[0] for row in csv.reader(io.StringIO(response.content.decode()))]
    assert '\'=HYPERLINK("http://evil")' in cells


# -- the page ----------------------------------------------------------------------------------


def test_the_page_shows_each_tile_with_its_hint_and_change(staff, usage):
    page = staff_client(staff).get(f"{URL}?{RANGE}").content.decode()
    assert 'data-tile="runs"' in page and "Runs started, whatever became of them." in page
    assert "▲ 100.0 %" in page  # runs, users and sessions doubled
    tiles = {
        key: page[page.index(f'data-tile="{key}"') :].split("</div>", 1)[0]
        for key in ("cost", "error_rate", "time_to_first_token_p50", "thumbs_up")
    }
    assert "$0.3200" in tiles["cost"]
    assert "25.0 %" in tiles["error_rate"]
    assert "350 ms" in tiles["time_to_first_token_p50"]  # 349.99 ms, as the admin shows times
    assert "of 4 ratings" in tiles["thumbs_up"] and "400" not in tiles["thumbs_up"]


def test_the_default_range_is_the_last_30_days(staff, usage):
    response = staff_client(staff).get(URL)
    assert response.status_code == 200
    scope = response.context["scope"]
    assert scope.end - scope.start == datetime(2025, 1, 31) - datetime(2025, 1, 1)


@pytest.mark.parametrize("preset,hours", [("24h", 24), ("7d", 168), ("90d", 2160)])
def test_presets_are_periods_ending_now(staff, preset, hours):
    scope = staff_client(staff).get(f"{URL}?range={preset}").context["scope"]
    assert (scope.end - scope.start).total_seconds() == hours * 3600


@pytest.mark.parametrize(
    "query,message",
    [
        ("start=2025-03-12&end=2025-03-10", "The range must start before it ends."),
        ("start=yesterday", "Enter a valid date."),
        ("start=0001-01-01", "Choose days between"),
        ("start=2020-01-01&end=2025-01-01", "at most 400 days"),
        ("range=1y", "Select a valid choice."),
        ("agent=not-a-uuid", "is not a valid UUID"),
        ("user=nobody", "No user is named"),
        ("csv=passwords", "Select a valid choice."),
    ],
)
def test_invalid_parameters_get_a_clear_message(staff, query, message):
    response = staff_client(staff).get(f"{URL}?{query}")
    assert response.status_code == 400
    assert message in response.content.decode()


def test_filters_are_kept_in_the_url_of_presets_and_downloads(staff, usage, alice):
    agent = usage["assistant"].pk
    page = staff_client(staff).get(f"{URL}?range=7d&agent={agent}&user=alice").content.decode()
    assert f"?range=24h&amp;agent={agent}&amp;user=alice" in page
    assert f"?range=7d&amp;agent={agent}&amp;user=alice&amp;csv=top_users" in page


def test_names_are_escaped_everywhere(staff, django_user_model):
    payload = '"><img src=x onerror=alert(1)><script>alert(1)</script>'
    agent = Agent.objects.create(name=payload, model=payload)
    user = django_user_model.objects.create_user(payload, password="x")
    session = Session.objects.create(user=user, agent=agent, session_name=payload)
    run = add_run(session, at(10, 9), RunStatus.ERROR, 1.0, error=payload)
    add_call(run, at(10, 9), (1, 1), "0.001", time_to_first_token=0.1, duration=1.0)
    response = staff_client(staff).get(f"{URL}?{RANGE}")
    page = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\u003Cscript\\u003Ealert(1)" in page  # the model's name in the charts' JSON


def test_the_page_takes_the_same_queries_whatever_the_data(
    staff, usage, django_assert_max_num_queries
):
    client = staff_client(staff)
    client.get(f"{URL}?{RANGE}")
    with django_assert_max_num_queries(24):
        assert client.get(f"{URL}?{RANGE}").status_code == 200


# -- the API agrees ----------------------------------------------------------------------------


def test_the_api_totals_equal_the_dashboards(staff, usage):
    body = api_client(staff).get("/api/metrics?group_by=day&start=2025-03-10&end=2025-03-11").json()
    days = body["data"]
    found = tiles()
    assert sum(d["input_tokens"] for d in days) == found["input_tokens"].value == 500
    assert sum(d["output_tokens"] for d in days) == found["output_tokens"].value == 121
    assert sum(d["cost"] for d in days) == pytest.approx(float(found["cost"].value))
    by_model = api_client(staff).get("/api/metrics?group_by=model&start=2025-03-10&end=2025-03-11")
    costs = {row["key"]: row["cost"] for row in by_model.json()["data"]}
    table = {r["model"]: float(r["cost"]) for r in dashboard.build(SCOPE).tables["top_models"]}
    assert costs == pytest.approx(table)


def test_days_are_utc_days(usage):
    assert Scope(SCOPE.start, SCOPE.end).days() == [date(2025, 3, 10), date(2025, 3, 11)]


# -- daily rollups -----------------------------------------------------------------------------

FIXTURE_DAYS = [date(2025, 3, d) for d in (8, 9, 10, 11)]


def rolled_up() -> dict[str, int]:
    return {
        "days": RolledDay.objects.count(),
        "runs": RunDay.objects.aggregate(n=Sum("started"))["n"] or 0,
        "ratings": RunDay.objects.aggregate(n=Sum(F("rated_up") + F("rated_down")))["n"] or 0,
        "calls": CallDay.objects.aggregate(n=Sum("made"))["n"] or 0,
        "times": LatencyDay.objects.aggregate(n=Sum("calls"))["n"] or 0,
    }


def figures(board: dashboard.Dashboard) -> tuple:
    return (
        [(t.key, t.value, t.previous, t.parts) for t in board.tiles],
        board.charts,
        board.tables,
    )


def test_the_first_reading_rolls_up_the_closed_days_of_both_periods(usage):
    dashboard.build(SCOPE)
    assert sorted(RolledDay.objects.values_list("day", flat=True)) == FIXTURE_DAYS
    # Six runs started and five ratings given on those days; eight calls, six of them chats
    # (five with a first token, six with a duration).
    assert rolled_up() == {"days": 4, "runs": 6, "ratings": 5, "calls": 8, "times": 11}


def test_filling_again_counts_nothing_twice(usage):
    dashboard.build(SCOPE)
    before = rolled_up()
    assert fill(FIXTURE_DAYS) == 0
    dashboard.build(SCOPE)
    assert rolled_up() == before
    assert tiles()["runs"].value == 4


def test_a_day_claimed_by_another_process_is_left_to_it(usage):
    RolledDay.objects.create(day=date(2025, 3, 10))
    assert fill(FIXTURE_DAYS) == 3
    assert not RunDay.objects.filter(day=date(2025, 3, 10)).exists()


@pytest.mark.django_db(transaction=True)
def test_two_processes_filling_at_once_roll_each_day_up_once(usage):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite lets one writer in at a time")
    start = threading.Barrier(2)
    done: list[int] = []

    def roll() -> None:
        start.wait()
        try:
            done.append(fill(FIXTURE_DAYS))
        finally:
            connection.close()

    threads = [threading.Thread(target=roll) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(done) == 4  # each day rolled up by one of them
    assert rolled_up() == {"days": 4, "runs": 6, "ratings": 5, "calls": 8, "times": 11}


@pytest.mark.parametrize(
    "narrow",
    [{}, {"agent": "coder"}, {"user": "alice"}, {"model": "scripted"}],
    ids=["everything", "agent", "user", "model"],
)
def test_rollups_and_rows_give_the_same_figures(usage, alice, narrow):
    filters = {
        "agent_id": usage["coder"].agent_id if "agent" in narrow else None,
        "user_id": alice.pk if "user" in narrow else None,
        "model": narrow.get("model", ""),
    }
    # A range starting mid-day whose last day is still open: rolled and live days side by side.
    mixed = Scope(at(9, 6), at(11, 18), rolled_until=date(2025, 3, 11), **filters)
    for scope in (replace(SCOPE, **filters), mixed):
        from_rollups = figures(dashboard.build(scope))
        assert RunDay.objects.exists()
        assert from_rollups == figures(dashboard.build(replace(scope, rolled_until=None)))


def test_open_days_are_read_live_and_closed_ones_rolled_up(staff, alice):
    agent = Agent.objects.create(name="Assistant", model="scripted")
    session = Session.objects.create(user=alice, agent=agent)
    now = timezone.now()
    for days_ago in (3, 1, 0):
        add_run(session, now - timedelta(days=days_ago), RunStatus.COMPLETED, 1.0)
    client = staff_client(staff)
    assert client.get(f"{URL}?range=7d").context["tiles"][2]["value"] == "3"
    rolled = set(RolledDay.objects.values_list("day", flat=True))
    assert (now - timedelta(days=3)).date() in rolled
    assert not rolled & {now.date(), (now - timedelta(days=1)).date()}
    add_run(session, now, RunStatus.ERROR, 1.0)
    assert client.get(f"{URL}?range=7d").context["tiles"][2]["value"] == "4"


def test_usage_of_a_deleted_session_stays_counted_once_rolled_up(usage):
    dashboard.build(SCOPE)
    usage["sessions"][0].delete()
    assert tiles()["runs"].value == 4
    assert tiles(LIVE)["runs"].value == 4


def day_totals(board: dashboard.Dashboard) -> tuple:
    """Every figure but the lists of runs to open (the slowest, the latest errors)."""
    tops = {name: rows for name, rows in board.tables.items() if name.startswith("top_")}
    return ([(t.key, t.value, t.previous, t.parts) for t in board.tiles], board.charts, tops)


def test_deleting_a_session_leaves_every_days_totals_as_they_were(usage, alice):
    before = day_totals(dashboard.build(LIVE))
    assert RolledDay.objects.count() == 0
    session = usage["sessions"][0]

    assert api_client(alice).delete(f"/api/sessions/{session.pk}").status_code == 204

    assert not Run.objects.filter(session_id=session.pk).exists()
    assert day_totals(dashboard.build(LIVE)) == before
    # Days rolled up only now, after the deletion, count it as well.
    assert day_totals(dashboard.build(SCOPE)) == before
    assert RolledDay.objects.exists()


def test_the_page_takes_the_same_queries_whatever_the_range(staff, usage):
    client = staff_client(staff)
    counts = []
    for query in (RANGE, "start=2025-01-01&end=2025-03-31"):
        client.get(f"{URL}?{query}")
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"{URL}?{query}").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 24


def test_the_rollup_command_fills_closed_days_ahead(alice):
    agent = Agent.objects.create(name="Assistant", model="scripted")
    session = Session.objects.create(user=alice, agent=agent)
    add_run(session, timezone.now() - timedelta(days=3), RunStatus.COMPLETED, 1.0)
    out = io.StringIO()
    call_command("rollup_usage", "--days", "5", stdout=out)
    assert "Rolled up 5 day(s)" in out.getvalue()  # the five days before yesterday
    assert RunDay.objects.aggregate(n=Sum("started"))["n"] == 1
    call_command("rollup_usage", "--days", "5", stdout=out)
    assert "Rolled up 0 day(s)" in out.getvalue()
