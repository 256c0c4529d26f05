"""The processes under test: a scratch database, the scripted upstream, Parley and the baseline,
and Parley in its deployed shape (`manage.py serve --workers N` on PostgreSQL and Redis).

Each server is a real subprocess bound to 127.0.0.1, so the load generator (this process) shares
no GIL with what it measures. Everything started here is stopped and removed on exit, whatever
happens: `Stack.close` runs from `finally` and from atexit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench.procs import command_name, descendants
from serving.children import free_port
from serving.layers import redis_problem
from serving.listening import daphne_endpoint
from serving.nginx import find_nginx

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_NAME = "parley_bench"
PG_NAME_REF = "parley_bench_ref"
# The deployed shape's own database and Redis database (`--redis` gives one-process Parley 14).
PG_NAME_DEPLOYED = "parley_dbench"
REDIS_URL_DEPLOYED = "redis://127.0.0.1:6379/13"
START_TIMEOUT = 60.0
HELPER_TIMEOUT = 300.0


class BenchError(RuntimeError):
    """A server or helper did not do what the benchmark needs."""


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise BenchError(f"git {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout.strip()


def _pg_execute(sql: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def deployed_problem() -> str | None:
    """What the deployed shape needs and this machine lacks (PostgreSQL, Redis, nginx), or
    None."""
    try:
        _pg_execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no PostgreSQL at {PG_ADMIN_URL} ({exc})"
    problem = redis_problem(REDIS_URL_DEPLOYED)
    if problem:
        return problem
    if find_nginx(os.getenv("PARLEY_NGINX", "")) is None:
        return "no nginx (Debian: apt-get install nginx)"
    return None


def _pg_backends(database: str) -> list[int]:
    """The PostgreSQL server processes serving connections to `database` at this moment."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [database])
        return [int(pid) for (pid,) in rows]


def _redis_pid(url: str) -> int | None:
    """The Redis server's process, when it runs on this machine (its /proc is ours to read)."""
    pid = int(redis.Redis.from_url(url).info("server")["process_id"])
    return pid if command_name(pid) == "redis-server" else None


@dataclass
class Checkout:
    """Another commit's code, in a git worktree of its own, and the scratch database its
    server uses (`--against-ref`)."""

    commit: str  # short id
    root: Path
    database_url: str


@dataclass
class Stack:
    """Scratch database plus server processes; `close()` undoes everything."""

    db: str = "sqlite"
    redis: bool = False
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="parley-bench-")))
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    database_url: str = ""
    ref: Checkout | None = None
    # The deployed shape's database and Redis, as environment variables, once made.
    deployed_env: dict[str, str] = field(default_factory=dict)
    serves: set[str] = field(default_factory=set)  # the servers that are `serve --workers N`
    redis_pid: int | None = None
    _closed: bool = False

    def __post_init__(self) -> None:
        atexit.register(self.close)
        if self.db == "postgres":
            _pg_execute(f"DROP DATABASE IF EXISTS {PG_NAME} WITH (FORCE)")
            _pg_execute(f"CREATE DATABASE {PG_NAME}")
            self.database_url = f"postgres://postgres@127.0.0.1:5432/{PG_NAME}"
        else:
            self.database_url = f"sqlite:///{self.tmp / 'bench.sqlite3'}"
        self.secret = secrets.token_urlsafe(40)

    # -- environment -----------------------------------------------------------------------

    def env(
        self, settings: str = "project.settings", ref: Checkout | None = None, **extra: str
    ) -> dict[str, str]:
        """The environment of a server or helper: of this checkout, or of `ref`'s."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("REDIS_URL", "OPENAI_API_KEY", "LLM_MODEL")
        }
        env.update(
            PYTHONPATH=str(ref.root if ref else ROOT),
            DJANGO_SETTINGS_MODULE=settings,
            DATABASE_URL=ref.database_url if ref else self.database_url,
            LLM_BASE_URL=self.upstream_url,
            LLM_API_KEY="bench",
            # A benchmark measures production settings: DEBUG would log every query.
            DEBUG="false",
            SECRET_KEY=self.secret,
            SECURE_COOKIES="false",
            PARLEY_RUNS_PER_MINUTE="0",
            PARLEY_SESSIONS_PER_MINUTE="0",
            # Titles are a background model call per new session: not part of relaying a run,
            # and neither reference makes one.
            PARLEY_GENERATE_TITLES="false",
            PARLEY_WORKERS="1",
            LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
        )
        if self.redis:
            env["REDIS_URL"] = "redis://127.0.0.1:6379/14"
        env.update(extra)
        return env

    @property
    def upstream_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.get('upstream', 0)}/v1"

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def checkout(self, rev: str) -> Checkout:
        """`rev`'s code in a detached git worktree, with a scratch database of its own (not yet
        migrated); `close()` removes both."""
        commit = _git("rev-parse", "--short", "--verify", f"{rev}^{{commit}}")
        if self.db == "postgres":
            url = f"postgres://postgres@127.0.0.1:5432/{PG_NAME_REF}"
        else:
            url = f"sqlite:///{self.tmp / 'bench-ref.sqlite3'}"
        self.ref = Checkout(commit, self.tmp / f"ref-{commit}", url)  # close() removes both
        _git("worktree", "add", "--detach", str(self.ref.root), commit)
        if self.db == "postgres":
            _pg_execute(f"DROP DATABASE IF EXISTS {PG_NAME_REF} WITH (FORCE)")
            _pg_execute(f"CREATE DATABASE {PG_NAME_REF}")
        return self.ref

    # -- processes -------------------------------------------------------------------------

    def spawn(
        self, name: str, args: list[str], env: dict[str, str], port: int, cwd: Path = ROOT
    ) -> None:
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [PYTHON, *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs[name] = proc
        self.ports[name] = port
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"{name} exited at start:\n{self.log_tail(name)}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return
            time.sleep(0.05)
        raise BenchError(f"{name} did not listen on port {port}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.tmp / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def start_upstream(self) -> None:
        port = free_port()
        self.spawn(
            "upstream", ["-m", "bench.upstream", "--port", str(port)], dict(os.environ), port
        )

    def start_daphne(
        self,
        name: str,
        application: str,
        settings: str,
        ref: Checkout | None = None,
        **extra: str,
    ) -> None:
        """A daphne process serving this checkout's code, or `ref`'s (from its worktree, on its
        database)."""
        port = free_port()
        # Listening as `manage.py serve` does: with a queue for a burst of new connections.
        endpoint = daphne_endpoint("127.0.0.1", port)
        args = ["-m", "daphne", "-v", "0", "--endpoint", endpoint, application]
        cwd = ref.root if ref else ROOT
        self.spawn(name, args, self.env(settings, ref, **extra), port, cwd)

    def prepare_deployed(self) -> dict[str, str]:
        """An empty PostgreSQL database and Redis database for the deployed shape; the
        environment that points its helpers and its server at them. `close()` empties both."""
        _pg_execute(f"DROP DATABASE IF EXISTS {PG_NAME_DEPLOYED} WITH (FORCE)")
        _pg_execute(f"CREATE DATABASE {PG_NAME_DEPLOYED}")
        redis.Redis.from_url(REDIS_URL_DEPLOYED).flushdb()
        self.redis_pid = _redis_pid(REDIS_URL_DEPLOYED)
        self.deployed_env = {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{PG_NAME_DEPLOYED}",
            "REDIS_URL": REDIS_URL_DEPLOYED,
        }
        return dict(self.deployed_env)

    def start_serve(self, name: str, workers: int, **extra: str) -> None:
        """`manage.py serve --workers N` as an operator runs it: nginx on a free port in front
        of N daphne processes. serve starts nginx once every worker listens, so a connection
        to nginx's port means all are ready."""
        port = free_port()
        args = ["manage.py", "serve", "--workers", str(workers)]
        args += ["--host", "127.0.0.1", "--port", str(port)]
        self.spawn(name, args, self.env("project.settings", None, **extra), port)
        self.serves.add(name)

    def processes(self, name: str) -> dict[int, str]:
        """The processes doing a server's work, each named by its part: its one daphne; or, for
        a `serve --workers N`, serve itself, nginx (master and workers), each daphne, the
        PostgreSQL backends of its database and the Redis server (shared with anyone else's
        use of it)."""
        pid = self.pid(name)
        if name not in self.serves:
            # On PostgreSQL, its database's backends work for it, as they do for a serve.
            backends = _pg_backends(PG_NAME) if self.db == "postgres" and name == "parley" else []
            return {pid: "daphne", **{p: "PostgreSQL" for p in backends}}
        found = {pid: "serve"}
        children = descendants(pid)
        daphnes = sorted(p for p in children if command_name(p).startswith("python"))
        found.update({p: "nginx" for p in children if command_name(p) == "nginx"})
        found.update({p: f"daphne {n}" for n, p in enumerate(daphnes, 1)})
        found.update({p: "PostgreSQL" for p in _pg_backends(PG_NAME_DEPLOYED)})
        if self.redis_pid is not None:
            found[self.redis_pid] = "Redis"
        return found

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    # -- helpers run with the servers' settings -------------------------------------------

    def manage(self, *args: str, ref: Checkout | None = None, **extra: str) -> None:
        self._python("manage.py", *args, ref=ref, **extra)

    def helper(self, *args: str, ref: Checkout | None = None, **extra: str) -> Any:
        """Run `python -m bench.dbtool ARGS` in the servers' environment (or with `ref`'s code
        and database; `extra`: environment variables over it); its last line is JSON."""
        result = self._python("-m", "bench.dbtool", *args, ref=ref, **extra)
        return json.loads(result.stdout.decode().strip().splitlines()[-1])

    def _python(
        self, *args: str, ref: Checkout | None = None, **extra: str
    ) -> subprocess.CompletedProcess[bytes]:
        result = subprocess.run(
            [PYTHON, *args],
            cwd=ref.root if ref else ROOT,
            env=self.env("bench.naive.settings", ref, **extra),
            capture_output=True,
            timeout=HELPER_TIMEOUT,
        )
        if result.returncode:
            raise BenchError(f"{' '.join(args)} failed:\n{result.stderr.decode()}")
        return result

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for name in list(self.procs):
            with contextlib.suppress(Exception):
                self.stop(name)
        stale_worktree = False
        if self.ref is not None:
            try:
                _git("worktree", "remove", "--force", str(self.ref.root))
            except Exception:
                stale_worktree = True
        if self.db == "postgres":
            for name in (PG_NAME, PG_NAME_REF) if self.ref else (PG_NAME,):
                with contextlib.suppress(Exception):
                    _pg_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if self.deployed_env:
            with contextlib.suppress(Exception):
                _pg_execute(f"DROP DATABASE IF EXISTS {PG_NAME_DEPLOYED} WITH (FORCE)")
            with contextlib.suppress(Exception):
                redis.Redis.from_url(REDIS_URL_DEPLOYED).flushdb()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if stale_worktree:  # git forgets a worktree whose folder is gone
            with contextlib.suppress(Exception):
                _git("worktree", "prune")
