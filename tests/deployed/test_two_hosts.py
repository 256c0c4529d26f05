"""Two hosts behind one proxy (tests/deployed/hosts.py); host B's clock ten minutes slow
(libfaketime, read by each of its processes from its HOME): its runs are still judged alive,
and dead, by the database's clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import Browser, expect

from sessions_app.models import Run, RunStatus, User
from testkit.upstream import Reply, ScriptedUpstream
from tests.deployed.conftest import log_in
from tests.deployed.hosts import Host, front, slow_clock, two_hosts
from tests.deployed.streams import StreamedRun, wait_until
from tests.e2e.conftest import ACTION_TIMEOUT_MS
from tests.support.apiclient import bearer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

BEAT, STALE = 1.0, 5.0
ANSWER = "[data-testid=assistant-message]"


@pytest.fixture(scope="module")
def hosts(serve_environment, tmp_path_factory) -> Iterator[dict[str, Host]]:
    timing = {"PARLEY_HEARTBEAT_INTERVAL": str(BEAT), "PARLEY_STALE_RUN_AFTER": str(STALE)}
    with (
        slow_clock(minutes=10) as slow,
        two_hosts({**serve_environment, **timing}, tmp_path_factory.mktemp("hosts"), slow) as found,
    ):
        yield found


@pytest.fixture(scope="module")
def proxy(hosts, serve_environment, tmp_path_factory) -> Iterator[str]:
    static = Path(serve_environment["STATIC_ROOT"])
    with front(hosts, static, tmp_path_factory.mktemp("front")) as url:
        yield url


def test_the_proxy_shares_runs_between_the_hosts(hosts, proxy, alice: User):
    with httpx.Client(base_url=proxy, headers=bearer(alice), timeout=30) as client:
        runs = [client.post("/api/runs", json={"input": f"Hi {n}"}).json() for n in range(6)]
    workers = Run.objects.filter(pk__in=[r["run_id"] for r in runs]).values_list("worker")
    assert {worker.split(":")[0] for (worker,) in workers} == {"host-a", "host-b"}


def test_each_host_has_a_name_and_processes_of_its_own(hosts, proxy, alice: User, upstream):
    upstream.script(Reply(tokens=200, delay=0.05))
    run = StreamedRun(hosts["b"].url, bearer(alice), input="Count slowly")
    run.wait_for(1)
    worker = Run.objects.get(pk=run.run_id).worker
    assert worker.startswith("host-b:")
    # Numbered in its own namespace, where serve is the first process.
    assert int(worker.split(":")[1]) < 100
    httpx.post(f"{hosts['b'].url}/api/runs/{run.run_id}/cancel", headers=bearer(alice))
    run.join()


def test_a_browser_on_one_host_follows_stops_and_is_refused_a_run_of_the_other(
    hosts, proxy, browser: Browser, alice: User, upstream: ScriptedUpstream
):
    upstream.script(Reply(tokens=400, delay=0.05))
    context = browser.new_context(base_url=hosts["a"].url)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "alice", "alice-pass-123")
    created = httpx.post(f"{proxy}/api/sessions", json={}, headers=bearer(alice))
    session_id = created.json()["session_id"]
    page.goto(f"/s/{session_id}/")
    expect(page.get_by_test_id("chat-send")).to_be_enabled()

    run = StreamedRun(hosts["b"].url, bearer(alice), input="Tell me", session_id=session_id)
    answer = page.locator(ANSWER)
    expect(answer).to_contain_text("tok5")  # streamed on B, shown on A
    assert Run.objects.get(pk=run.run_id).worker.startswith("host-b:")

    # One run per session, whichever host is asked.
    again = httpx.post(
        f"{hosts['a'].url}/api/runs",
        json={"input": "And another", "session_id": session_id},
        headers=bearer(alice),
    )
    assert again.status_code == 409, again.text

    # Stopped from A's page, the run on B stops, and A's page says so.
    page.get_by_test_id("chat-stop").click()
    expect(answer).to_have_attribute("data-run-status", "cancelled")
    run.join()
    assert Run.objects.get(pk=run.run_id).status == RunStatus.CANCELLED
    context.close()


def test_a_host_killed_whole_leaves_its_runs_interrupted_within_the_stale_window(
    hosts, proxy, alice: User, upstream: ScriptedUpstream
):
    """Host B, whose clock is ten minutes slow, streams; alive, host A leaves its run be; once
    every process of B is killed, A ends it within the stale window and a beat."""
    upstream.script(Reply(tokens=2000, delay=0.05))
    run = StreamedRun(hosts["b"].url, bearer(alice), input="Tell me everything")
    run.wait_for(1)
    stamped = Run.objects.get(pk=run.run_id).created_at  # by B's clock
    assert stamped < timezone.now() - timedelta(minutes=9), "host B's clock is not slow"
    time.sleep(2 * STALE)  # A beats and reaps meanwhile: B's run is alive
    assert Run.objects.get(pk=run.run_id).status == RunStatus.RUNNING
    hosts["b"].kill()
    killed = time.monotonic()
    wait_until(
        lambda: Run.objects.get(pk=run.run_id).status == RunStatus.INTERRUPTED,
        "the dead host's run interrupted",
        timeout=STALE + BEAT + 5,
    )
    assert time.monotonic() - killed <= STALE + 2 * BEAT + 1
    run.join()
