"""Private PostgreSQL and Redis servers on free loopback ports, each in a temporary directory,
for tests that stop, restart or break them without touching the machine's shared ones.

Usage::

    with PrivatePostgres() as pg, PrivateRedis() as redis:
        pg.create_database("parley")
        url = pg.url("parley")          # postgres://postgres@127.0.0.1:PORT/parley
        pg.restart()                    # every open connection is cut
        redis.stop(); redis.start()     # same port, empty

PostgreSQL is Debian's (`/usr/lib/postgresql/<version>/bin`); `initdb` refuses to run as root,
so as root every PostgreSQL binary runs as the `postgres` user, in a directory it owns.
`unavailable()` says why a server cannot run here, for a test to skip with.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from serving.children import free_port

__all__ = ["PrivatePostgres", "PrivateRedis"]


def _wait_for_port(port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                message = f"{what} did not listen on port {port} within {timeout} s"
                raise RuntimeError(message) from exc
            time.sleep(0.05)


class PrivatePostgres:
    """A throwaway cluster: trust authentication, user `postgres`, no fsync."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bin = self._binaries()
        self.dir: Path | None = None

    @staticmethod
    def _binaries() -> Path | None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
        return Path(found[-1]).parent if found else None

    @classmethod
    def unavailable(cls) -> str | None:
        if cls._binaries() is None:
            return "PostgreSQL's server binaries are not installed (/usr/lib/postgresql/*/bin)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root, and there is no postgres user to run initdb as"
        return None

    def _run(self, *args: str) -> None:
        assert self.bin is not None
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> PrivatePostgres:
        reason = self.unavailable()
        if reason:
            raise RuntimeError(reason)
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="parley-pg-"))
            if os.geteuid() == 0:
                user = pwd.getpwnam("postgres")
                os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                "--locale=C", "--no-sync",
            )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", options,
                  "-w", "-t", "60", "start")  # fmt: skip
        return self

    def stop(self) -> None:
        """Fast shutdown: every client's connection is cut, as a restart of the server does."""
        if self.dir is not None and (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PrivatePostgres:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def data(self) -> Path:
        assert self.dir is not None
        return self.dir / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        """One statement, outside a transaction (CREATE DATABASE, ALTER SYSTEM)."""
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self, name: str, template: str = "template1") -> str:
        """A new database, a copy of `template` (which no one may be connected to)."""
        self.sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.url(name)

    def set_read_only(self, read_only: bool) -> None:
        """Every transaction read-only from now on, or no more. The server restarts: a reload
        reaches each open connection only when it next notices, so some would write a while."""
        self.sql(f"ALTER SYSTEM SET default_transaction_read_only = {'on' if read_only else 'off'}")
        self.restart()


def _version(path: str) -> tuple[int, ...]:
    version = Path(path).parent.parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


class PrivateRedis:
    """A redis-server that keeps nothing on disk: a restart forgets everything, as a cache does."""

    def __init__(self) -> None:
        self.port = free_port()
        self.binary = shutil.which("redis-server")
        self.process: subprocess.Popen[bytes] | None = None
        self.dir: Path | None = None

    @classmethod
    def unavailable(cls) -> str | None:
        return None if shutil.which("redis-server") else "redis-server is not installed"

    def start(self) -> PrivateRedis:
        if self.binary is None:
            raise RuntimeError("redis-server is not installed")
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="parley-redis-"))
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--logfile", str(self.dir / "log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_for_port(self.port, 30, "redis-server")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"
