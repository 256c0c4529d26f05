"""`serve --workers 2` stops everything it started: on Ctrl-C (SIGINT), on SIGTERM, and when it
is killed outright (its children get SIGTERM from the kernel then)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import redis
from django.db import connection

from testkit.parley import ROOT, ParleyProcess
from tests.deployed.conftest import REDIS_URL, launch
from tests.deployed.streams import wait_until


def descendants(pid: int) -> set[int]:
    """Every process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


def prefix_of(pid: int) -> list[str]:
    """The directory an nginx process was started with (`-p`), if `pid` is one."""
    try:  # nginx rewrites its command line as one string: "nginx: master process … -p DIR …"
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().replace("\0", " ").split()
    except OSError:
        return []
    return [args[args.index("-p") + 1]] if args[:1] == ["nginx:"] and "-p" in args else []


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
        return True


def listening(url: str) -> bool:
    host, _, port = url.removeprefix("http://").partition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name
)
def test_serve_stops_everything_it_started(serve_environment, tmp_path, signum):
    deployment = launch(serve_environment, tmp_path / "serve.log")
    assert deployment.process is not None
    started = descendants(deployment.process.pid)
    # nginx's directory and the workers' sockets', which a serve that is killed leaves behind.
    prefixes = [arg for pid in started for arg in prefix_of(pid)]
    prefixes += sorted({str(path.parent) for path in deployment.worker_sockets()})
    try:
        # Two daphne workers, nginx's master process and its workers.
        assert len(started) >= 4, started
        deployment.process.send_signal(signum)
        code = deployment.process.wait(timeout=60)
        wait_until(lambda: not any(map(running, started)), "every process serve started gone")
        if signum != signal.SIGKILL:
            assert code == 0, deployment.tail()
        assert not listening(deployment.base_url)
        assert not any(map(answers, deployment.worker_sockets()))
    finally:
        deployment.stop()
        for pid in filter(running, started):  # left behind: this test's failure, not the next's
            os.kill(pid, signal.SIGKILL)
        for prefix in prefixes:
            shutil.rmtree(prefix, ignore_errors=True)


def test_serve_exits_1_when_nginx_cannot_listen(serve_environment):
    """A failure an operator must see: serve stops its workers and exits non-zero, so that a
    service manager restarts it or reports it."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        parley = ParleyProcess(serve_environment, taken.getsockname()[1], workers=2)
        served = subprocess.run(
            parley.command(),
            cwd=ROOT,
            env=parley.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert served.returncode == 1
    assert "Address already in use" in served.stderr
    assert "nginx exited (code 1); stopping." in served.stdout
    assert "CommandError: Parley stopped: a process it runs failed" in served.stderr


def test_workers_listen_on_unix_sockets_no_other_user_can_reach(deployed):
    """Not on loopback ports, which another local user could connect to, or take while a
    worker restarts: on sockets in a directory only nginx's workers may enter."""
    sockets = deployed.worker_sockets()
    assert len(sockets) == 2 and all(map(answers, sockets))
    (directory,) = {path.parent for path in sockets}
    status = directory.stat()
    if os.geteuid() == 0:  # nginx's workers run as nobody: their group may pass, not write
        assert (status.st_uid, status.st_gid) == (0, pwd.getpwnam("nobody").pw_gid)
        assert status.st_mode & 0o777 == 0o710
    else:
        assert (status.st_uid, status.st_mode & 0o777) == (os.getuid(), 0o700)
    children = descendants(deployed.process.pid)
    daphnes = [p for p in children if b"--socket" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(daphnes) == 2
    tcp = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    assert not any(f"pid={pid}," in tcp for pid in daphnes), tcp


def _database_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
            [connection.settings_dict["NAME"]],
        )
        return cursor.fetchone()[0]


def _redis_clients() -> int:
    return len(redis.Redis.from_url(REDIS_URL).client_list())


@pytest.mark.django_db(transaction=True)
def test_serve_is_ready_only_once_each_worker_has_its_connections_open(
    serve_environment, upstream, tmp_path, settings
):
    """Database (the engine's thread and each request thread), Redis, the model's endpoint:
    open before serve says it serves, so the first burst does not wait for them."""
    database, clients, model_lists = _database_connections(), _redis_clients(), upstream.model_lists
    deployment = ParleyProcess(serve_environment, workers=2, log=tmp_path / "serve.log")
    deployment.launch()
    try:
        wait_until(lambda: "(2 workers)" in deployment.output(), "serve saying it serves")
        # Nothing has been asked of it yet.
        assert _database_connections() - database >= 2 * (1 + settings.PARLEY_REQUEST_THREADS)
        assert _redis_clients() - clients >= 2 * 2
        assert upstream.model_lists - model_lists == 2
    finally:
        deployment.stop()
