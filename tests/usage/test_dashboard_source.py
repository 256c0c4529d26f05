"""The dashboard's Source filter: runs that came in by one door (chat page, REST API, OpenAI
API, Agno import) and the model calls of those runs, in every figure, table and download, even
after the runs are deleted, and read from the rows where the daily rollups cannot tell."""

from __future__ import annotations

import csv
import html
import io
import re
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Agent, CallKind, DeletedRun, RolledDay, Run, RunStatus, Session
from tests.support.apiclient import api_client
from tests.usage.test_dashboard import RANGE, URL, add_call, add_run, at, staff_client

pytestmark = pytest.mark.django_db

OPENAI = f"{URL}?{RANGE}&source=openai"


@pytest.fixture
def doors(alice, bob):
    """Runs of every door in the range (10 and 11 March) and one before it, each with its chat
    call; a title call of alice's chat session; a run from before sources were recorded.

    Through the OpenAI API (bob): o1 and o2 (an error) in the range, g1 in a session of its
    own, o0 on the 9th: 3 runs, tokens in 40 + 50 + 60 = 150, out 4 + 0 + 6 = 10, cost 0.015.
    """
    agent = Agent.objects.create(name="Assistant", model="scripted")
    chat = Session.objects.create(user=alice, agent=agent, session_name="By the chat page")
    api = Session.objects.create(user=alice, agent=agent, session_name="By the REST API")
    openai = Session.objects.create(user=bob, agent=agent, session_name="By the OpenAI API")
    gone = Session.objects.create(user=bob, agent=agent, session_name="Deleted later")
    old = Session.objects.create(user=alice, agent=agent, session_name="From before sources")

    def run(session, when, source, tokens, cost, status=RunStatus.COMPLETED, **fields):
        made = add_run(session, when, status, fields.pop("duration", 1.0), source=source)
        add_call(made, when, tokens, cost, kind=CallKind.CHAT, **fields)
        return made

    c1 = run(chat, at(10, 9), "chat", (100, 10), "0.010", time_to_first_token=0.2)
    add_call(c1, at(10, 9, 1), (30, 5), "0.001", kind=CallKind.TITLE)  # of no run
    run(api, at(11, 8), "api", (200, 20), "0.020", time_to_first_token=0.4)
    o1 = run(openai, at(10, 12), "openai", (40, 4), "0.004", time_to_first_token=0.5,
             duration=2.0)  # fmt: skip
    o2 = run(openai, at(11, 14), "openai", (50, 0), "0.005", RunStatus.ERROR, duration=3.0,
             ok=False, error="upstream said no")  # fmt: skip
    Run.objects.filter(pk=o2.pk).update(error="upstream said no")
    g1 = run(gone, at(11, 10), "openai", (60, 6), "0.006", time_to_first_token=0.7)
    run(openai, at(9, 12), "openai", (10, 1), "0.001", time_to_first_token=0.3)
    run(old, at(10, 16), "", (7, 7), "0.007")
    return {"gone": gone, "runs": {"c1": c1, "o1": o1, "o2": o2, "g1": g1}}


def shown_tiles(client, url: str) -> dict[str, str]:
    """Each tile's value as the page shows it."""
    response = client.get(url)
    assert response.status_code == 200
    return {tile["key"]: tile["value"] for tile in response.context["tiles"]}


def table_csv(client, url: str, name: str) -> list[list[str]]:
    response = client.get(f"{url}&csv={name}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_the_filter_offers_every_source_and_all_of_them_by_default(staff, doors):
    page = staff_client(staff).get(f"{URL}?{RANGE}").content.decode()
    select = re.search(r'<select name="source"[^>]*>(.*?)</select>', page, re.S).group(1)
    options = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select)
    assert options == [
        ("", "All sources"), ("chat", "Chat page"), ("api", "REST API"),
        ("openai", "OpenAI API"), ("import", "Agno import"), ("history", "Client&#x27;s history"),
    ]  # fmt: skip
    everything = shown_tiles(staff_client(staff), f"{URL}?{RANGE}")
    assert (everything["runs"], everything["input_tokens"]) == ("6", "487")


def test_tiles_count_only_the_chosen_source_even_where_days_are_rolled_up(staff, doors):
    client = staff_client(staff)
    client.get(f"{URL}?{RANGE}")  # rolls up every day of the fixture: all are closed
    assert RolledDay.objects.count() == 4

    openai = shown_tiles(client, OPENAI)
    assert (openai["runs"], openai["active_users"], openai["sessions"]) == ("3", "1", "2")
    assert (openai["input_tokens"], openai["output_tokens"]) == ("150", "10")
    assert openai["cost"] == "$0.0150"
    assert openai["error_rate"] == "33.3 %"
    # Of 0.5 s and 0.7 s (o2 has none), within the 1 % of the histograms' buckets.
    assert float(openai["time_to_first_token_p50"].removesuffix(" ms")) == pytest.approx(600, 0.01)
    previous = {t["key"]: t["previous"] for t in client.get(OPENAI).context["tiles"]}
    assert previous["runs"] == "1"

    by_chat = shown_tiles(client, f"{URL}?{RANGE}&source=chat")
    # The title call belongs to no run, so to no source.
    assert (by_chat["runs"], by_chat["input_tokens"], by_chat["cost"]) == ("1", "100", "$0.0100")
    page = client.get(f"{URL}?{RANGE}&source=chat").content.decode()
    assert "Source “Chat page”" in page and "title and summary calls" in page


def test_other_filters_and_the_source_narrow_together(staff, doors, alice):
    none = shown_tiles(staff_client(staff), f"{OPENAI}&user=alice")
    assert (none["runs"], none["input_tokens"]) == ("0", "–")  # no call: no tokens known


def test_tables_and_their_downloads_follow_the_source(staff, doors):
    client = staff_client(staff)
    board = client.get(OPENAI).context
    runs = doors["runs"]
    tables = {table["name"]: table for table in board["tables"]}
    assert [row[0][0] for row in tables["top_users"]["rows"]] == ["bob"]
    assert f"/admin/sessions_app/run/{runs['c1'].pk}/change/" not in str(tables)

    header, *users = table_csv(client, OPENAI, "top_users")
    assert header == ["User", "Runs", "Errors", "Tokens in", "Tokens out", "Cost"]
    assert [(*row[:5], Decimal(row[5])) for row in users] == [
        ("bob", "3", "1", "150", "10", Decimal("0.015"))
    ]
    slowest = table_csv(client, OPENAI, "slowest_runs")
    assert [row[0] for row in slowest[1:]] == [
        "2025-03-11T14:00:00+00:00", "2025-03-10T12:00:00+00:00", "2025-03-11T10:00:00+00:00",
    ]  # fmt: skip
    errors = table_csv(client, OPENAI, "latest_errors")
    assert [row[-1] for row in errors[1:]] == ["upstream said no"]
    assert table_csv(client, f"{URL}?{RANGE}&source=chat", "latest_errors")[1:] == []
    assert table_csv(client, f"{URL}?{RANGE}&source=import", "top_models")[1:] == []


def test_the_source_is_kept_in_the_pages_links(staff, doors):
    page = staff_client(staff).get(f"{URL}?range=7d&source=openai").content.decode()
    assert "?range=24h&amp;source=openai" in page
    assert "?range=7d&amp;source=openai&amp;csv=top_users" in page
    assert '<option value="openai" selected>' in page


def test_a_models_link_into_the_runs_admin_lists_that_sources_runs(staff, doors):
    client = staff_client(staff)
    page = client.get(OPENAI).content.decode()
    link = re.search(r'href="(/admin/sessions_app/run/\?model=scripted[^"]*)"', page).group(1)
    assert "source__exact=openai" in link
    listed = client.get(html.unescape(link)).context["cl"].result_list
    runs = doors["runs"]
    assert {r.pk for r in listed} == {runs["o1"].pk, runs["o2"].pk, runs["g1"].pk}


def test_a_deleted_run_still_counts_under_its_source(staff, doors, bob):
    client = staff_client(staff)
    before = shown_tiles(client, OPENAI)
    users_before = table_csv(client, OPENAI, "top_users")
    chat_before = shown_tiles(client, f"{URL}?{RANGE}&source=chat")

    gone = doors["gone"]
    assert api_client(bob).delete(f"/api/sessions/{gone.pk}").status_code == 204

    assert not Run.objects.filter(pk=doors["runs"]["g1"].pk).exists()
    assert DeletedRun.objects.get(pk=doors["runs"]["g1"].pk).source == "openai"
    after = shown_tiles(client, OPENAI)
    assert (after["runs"], after["input_tokens"], after["cost"]) == ("3", "150", "$0.0150")
    assert after == before
    assert table_csv(client, OPENAI, "top_users") == users_before
    assert shown_tiles(client, f"{URL}?{RANGE}&source=chat") == chat_before


def test_an_unknown_source_is_a_form_error(staff, doors):
    response = staff_client(staff).get(f"{URL}?{RANGE}&source=carrier-pigeon")
    assert response.status_code == 400
    assert "Source: Select a valid choice." in html.unescape(response.content.decode())
    csv_asked = staff_client(staff).get(f"{URL}?{RANGE}&source=carrier-pigeon&csv=top_users")
    assert csv_asked.status_code == 400 and not csv_asked["Content-Type"].startswith("text/csv")


def test_the_filter_is_for_staff_who_may_see_the_dashboard(client, alice, doors):
    assert client.get(OPENAI)["Location"].startswith("/admin/login/")
    client.force_login(alice)
    response = client.get(f"{OPENAI}&csv=top_users")
    assert response.status_code == 302 and b"bob" not in response.content


def test_a_filtered_page_takes_the_same_queries_whatever_the_range(staff, doors):
    client = staff_client(staff)
    counts = []
    for query in (RANGE, "start=2025-01-01&end=2025-03-31"):
        client.get(f"{URL}?{query}&source=openai")
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"{URL}?{query}&source=openai").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 24
