"""Two hosts on one machine, for the deployed shape's tests: each a `serve --workers 2` in
namespaces of its own (hostname, process ids, /proc: neither sees the other's processes) on a
loopback address of its own, both on the same PostgreSQL and Redis, and one nginx in front of
both with the configuration `serve` gives its own (deploy/nginx)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from serving import nginx
from serving.children import free_port, plain_environment
from testkit.parley import ROOT, ParleyProcess
from tests.deployed.conftest import STARTUP_TIMEOUT
from tests.deployed.streams import wait_until

ADDRESSES = {"a": "127.0.0.2", "b": "127.0.0.3"}
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


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
        while not answers(f"{self.url}/healthz"):
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


def answers(url: str) -> bool:
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


def needs_namespaces() -> None:
    if not shutil.which("unshare") or not LIBFAKETIME.exists():
        missing = "needs unshare and libfaketime (apt-get install faketime)"
        pytest.fail(missing) if os.getenv("CI") else pytest.skip(missing)


@contextmanager
def slow_clock(minutes: int) -> Iterator[dict[str, str]]:
    """The environment that puts a process and its children this many minutes behind: a HOME
    whose .faketimerc libfaketime reads. Under it a thread's timed wait never ends (with
    DONT_FAKE_MONOTONIC, sleeping fails instead): serve's own watch of its children stalls, so
    such a host's workers are not restarted; the workers, on their event loops, run as usual."""
    home = Path(tempfile.mkdtemp(prefix="parley-slow-host-"))
    (home / ".faketimerc").write_text(f"-{minutes * 60}\n")
    home.chmod(0o755)
    try:
        yield {"HOME": str(home), "LD_PRELOAD": str(LIBFAKETIME)}
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def two_hosts(env: dict[str, str], logs: Path, b_env: dict[str, str]) -> Iterator[dict[str, Host]]:
    """Hosts a and b started, on one port of their own addresses; `b_env` added to b's."""
    needs_namespaces()
    port = _free_on_both()
    env = {**env, "ALLOWED_HOSTS": "127.0.0.1,127.0.0.2,127.0.0.3,localhost"}
    found = {
        "a": Host("a", env, port, logs / "a.log"),
        "b": Host("b", {**env, **b_env}, port, logs / "b.log"),
    }
    try:
        for host in found.values():
            host.start()
        yield found
    finally:
        for host in found.values():
            host.kill()


@contextmanager
def front(hosts: dict[str, Host], static_root: Path, var: Path) -> Iterator[str]:
    """One nginx in front of the hosts; its URL."""
    var.mkdir(exist_ok=True)
    var.chmod(0o755)
    port = free_port()
    proxy = nginx.Proxy(
        listen=f"127.0.0.1:{port}",
        workers=[nginx.address(host.address, host.parley.port) for host in hosts.values()],
        static_root=static_root,
        var=var,
    )
    proxy.write_config()
    process = subprocess.Popen(proxy.command(nginx.find_nginx()), env=plain_environment())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(f"{url}/healthz"), "the front nginx")
        yield url
    finally:
        process.terminate()
        process.wait(10)
