"""Two hosts behind one proxy: each a `serve --workers 2` in namespaces of its own (hostname,
process ids, /proc: neither sees the other's processes) on a loopback address of its own, both
on the same PostgreSQL and Redis, and one nginx in front of both with deploy/'s configuration.

Host B's clock is ten minutes slow (libfaketime, read by each of its processes from its HOME):
its runs are still judged alive, and dead, by the database's clock."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import Browser, expect

from serving import nginx
from serving.children import free_port, plain_environment
from sessions_app.models import Run, RunStatus, User
from testkit.parley import ROOT, ParleyProcess
from testkit.upstream import Reply, ScriptedUpstream
from tests.deployed.conftest import STARTUP_TIMEOUT, log_in
from tests.deployed.streams import StreamedRun, wait_until
from tests.e2e.conftest import ACTION_TIMEOUT_MS
from tests.support.apiclient import bearer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

ADDRESSES = {"a": "127.0.0.2", "b": "127.0.0.3"}
BEAT, STALE = 1.0, 3.0
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
ANSWER = "[data-testid=assistant-message]"


class Host:
    """One host: serve in its own UTS, PID and mount namespaces (so its own /proc)."""

    def __init__(self, name: str, env: dict[str, str], port: int, log: Path) -> None:
        self.name, self.address = name, ADDRESSES[name]
        self.parley = ParleyProcess(env, port, workers=2, host=self.address, log=log)

    def start(self) -> Host:
        rename = f'hostname host-{self.name} && exec "$@"'
        namespaces = ["unshare", "--uts", "--pid", "--mount-proc", "--fork", "--kill-child"]
        with self.parley.log.open("ab") as out:
            self.parley.process = subprocess.Popen(
                [*namespaces, "sh", "-c", rename, "-", *self.parley.command()],
                cwd=ROOT,
                env=self.parley.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _answers(f"{self.url}/healthz"):
            assert self.parley.process.poll() is None, self.parley.tail()
            assert time.monotonic() < deadline, self.parley.tail()
            time.sleep(0.2)
        return self

    @property
    def url(self) -> str:
        return self.parley.base_url

    def kill(self) -> None:
        """Every process of the host at once: its namespace's first process, and with it all."""
        if self.parley.process is not None and self.parley.process.poll() is None:
            os.kill(self.parley.process.pid, signal.SIGKILL)
            self.parley.process.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _free_on_both() -> int:
    while True:
        port = free_port()
        try:
            for address in ADDRESSES.values():
                with socket.create_server((address, port)):
                    pass
        except OSError:
            continue
        return port


def _slow_clock_home() -> Path:
    """A HOME whose .faketimerc puts every process that reads it ten minutes behind."""
    home = Path(tempfile.mkdtemp(prefix="parley-host-b-"))
    (home / ".faketimerc").write_text("-600\n")
    home.chmod(0o755)
    return home


@pytest.fixture(scope="module")
def hosts(serve_environment, tmp_path_factory) -> Iterator[dict[str, Host]]:
    if not shutil.which("unshare") or not LIBFAKETIME.exists():
        missing = "needs unshare and libfaketime (apt-get install faketime)"
        pytest.fail(missing) if os.getenv("CI") else pytest.skip(missing)
    port, logs, home = _free_on_both(), tmp_path_factory.mktemp("hosts"), _slow_clock_home()
    env = {
        **serve_environment,
        "ALLOWED_HOSTS": "127.0.0.1,127.0.0.2,127.0.0.3,localhost",
        "PARLEY_HEARTBEAT_INTERVAL": str(BEAT),
        "PARLEY_STALE_RUN_AFTER": str(STALE),
    }
    slow = {**env, "HOME": str(home), "LD_PRELOAD": str(LIBFAKETIME)}
    found = {
        "a": Host("a", env, port, logs / "a.log"),
        "b": Host("b", slow, port, logs / "b.log"),
    }
    try:
        for host in found.values():
            host.start()
        yield found
    finally:
        for host in found.values():
            host.kill()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def proxy(hosts, serve_environment, tmp_path_factory) -> Iterator[str]:
    """One nginx in front of both hosts, with the configuration `serve` gives its own."""
    var = tmp_path_factory.mktemp("front")
    var.chmod(0o755)
    port = free_port()
    front = nginx.Proxy(
        listen=f"127.0.0.1:{port}",
        workers=[nginx.address(host.address, host.parley.port) for host in hosts.values()],
        static_root=Path(serve_environment["STATIC_ROOT"]),
        var=var,
    )
    front.write_config()
    process = subprocess.Popen(front.command(nginx.find_nginx()), env=plain_environment())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/healthz"), "the front nginx")
        yield url
    finally:
        process.terminate()
        process.wait(10)


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
