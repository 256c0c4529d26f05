"""`manage.py serve` as a deployment runs it: daphne listening with room for a burst."""

from __future__ import annotations

import errno
import json
import selectors
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from serving.listening import LISTEN_BACKLOG, daphne_endpoint
from serving.management.commands.serve import worker_environment
from testkit.parley import ParleyProcess
from tests.conftest import ROOT, subprocess_env

BURST = 200  # four times daphne's own default queue of 50


def _burst() -> int:
    """BURST, or less where the kernel caps every listen queue below it (net.core.somaxconn:
    4096 on current kernels, 128 on old ones): still more than daphne's default of 50."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return min(BURST, int(f.read()))
    except (OSError, ValueError):
        return BURST


def _connect_all(port: int, count: int, within: float) -> int:
    """Start `count` connections at once; how many the kernel completed within `within` s."""
    selector = selectors.DefaultSelector()
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            code = sock.connect_ex(("127.0.0.1", port))
            assert code in (0, errno.EINPROGRESS)
            socks.append(sock)
            selector.register(sock, selectors.EVENT_WRITE)
        done = 0
        deadline = time.monotonic() + within
        while done < count and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                selector.unregister(key.fileobj)
                if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    done += 1
        return done
    finally:
        selector.close()
        for sock in socks:
            sock.close()


def test_the_endpoint_names_the_port_the_interface_and_the_queue():
    assert daphne_endpoint("0.0.0.0", 8000) == "tcp:port=8000:interface=0.0.0.0:backlog=2048"
    # Colons separate the description's fields, so an IPv6 address's own are escaped.
    assert daphne_endpoint("::1", 8000) == r"tcp:port=8000:interface=\:\:1:backlog=2048"
    assert daphne_endpoint("[::]", 80, 64) == r"tcp:port=80:interface=\:\::backlog=64"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_serve_queues_a_burst_of_connections_while_it_is_busy():
    """A server busy with other work (here: stopped outright) accepts no connection for a
    while. The kernel completes new ones into the listen queue meanwhile; past the queue's size
    it drops them, and each dropped client waits a second before it tries again."""
    with ParleyProcess(subprocess_env()) as server:
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        try:
            burst = _burst()
            assert 50 < burst <= LISTEN_BACKLOG
            assert _connect_all(server.port, burst, within=0.8) == burst
        finally:
            server.process.send_signal(signal.SIGCONT)
        # Once it runs again, it serves as before.
        assert httpx.get(server.url("/healthz"), timeout=10).status_code in (200, 503)


# What a worker's Django makes of the environment serve gives it.
SEEN_BY_A_WORKER = """
import json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django
django.setup()
from django.conf import settings
from sessions_app.engine.coalesce import coalesce_interval
print(json.dumps({
    "secure_header": settings.SECURE_PROXY_SSL_HEADER,
    "runs_per_minute": settings.PARLEY_RUNS_PER_MINUTE,
    "interval_streaming_50": coalesce_interval(50),
    "environment": sorted(os.environ),
}))
"""


def seen_by_a_worker(workers: int = 2) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", SEEN_BY_A_WORKER],
        cwd=ROOT,
        env=worker_environment(workers),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout)


def test_a_worker_trusts_only_the_scheme_header_nginx_sets(monkeypatch):
    """nginx overwrites X-Forwarded-Proto; any other header would reach the worker as the
    client sent it, and a client could then pass for HTTPS."""
    monkeypatch.setenv("PROXY_SSL_HEADER", "X-Client-Scheme")

    assert seen_by_a_worker()["secure_header"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_a_worker_paces_its_answers_by_the_load_of_every_worker_on_its_host(monkeypatch):
    """Coalescing at its defaults (a step of 0.05 s per 50 streaming runs): 50 answers in one
    worker of two are 100 on the host, whatever PARLEY_WORKERS the environment held."""
    monkeypatch.setenv("PARLEY_WORKERS", "7")
    for name in (
        "PARLEY_COALESCE_INTERVAL",
        "PARLEY_COALESCE_RUNS",
        "PARLEY_COALESCE_MAX_INTERVAL",
    ):
        monkeypatch.delenv(name, raising=False)

    assert seen_by_a_worker(workers=2)["interval_streaming_50"] == pytest.approx(0.10)
    assert seen_by_a_worker(workers=1)["interval_streaming_50"] == pytest.approx(0.05)


def test_a_worker_gets_parleys_settings_and_nothing_else_of_the_environment(monkeypatch):
    monkeypatch.setenv("PARLEY_RUNS_PER_MINUTE", "7")
    monkeypatch.setenv("PARLEY_ADMIN_PASSWORD", "first-admin-password")
    monkeypatch.setenv("UNRELATED_TOKEN", "someone-elses")
    monkeypatch.setenv("LC_TIME", "C")

    seen = seen_by_a_worker()

    assert seen["runs_per_minute"] == 7
    assert "PATH" in seen["environment"] and "LC_TIME" in seen["environment"]
    assert "PARLEY_ADMIN_PASSWORD" not in seen["environment"]
    assert "UNRELATED_TOKEN" not in seen["environment"]
