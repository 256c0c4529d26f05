"""Serve Parley: the embedded model when no endpoint is set, then daphne (or, with --workers N,
N daphne processes behind nginx); all stop together."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from daphne.cli import CommandLineInterface
from daphne.server import twisted_loop
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from twisted.internet import defer, reactor
from twisted.internet.error import ReactorNotRunning

from serving import nginx, warmup
from serving.children import plain_environment
from serving.embedded import EmbeddedModel, EmbeddedModelError, ModelWatch
from serving.layers import redis_problem
from serving.listening import daphne_endpoint, daphne_socket_limits, daphne_unix_endpoint
from serving.workers import Child, Supervisor, Worker
from sessions_app import engine

# What serve's own options and the embedded model decide for each worker, not the environment;
# and the admin's first password, which only ensure_admin reads.
NOT_FOR_WORKERS = (
    "HOST",
    "PORT",
    "PARLEY_WORKERS",
    "LLM_BASE_URL",
    "PARLEY_LLM_EMBEDDED",
    "PARLEY_PROXY_HEADERS",
    "PROXY_SSL_HEADER",
    "PARLEY_ADMIN_PASSWORD",
)
# Addresses that mean "every interface": no browser names the server by them.
WILDCARDS = ("", "0.0.0.0", "::")
# What a Django process needs besides plain_environment's names and Parley's settings: its
# locale, its Python and packages, and how it reaches the model's endpoint (certificates, proxies).
PYTHON_PREFIXES = ("LC_", "PYTHON")
PYTHON_ENVIRONMENT = (
    "VIRTUAL_ENV",
    "DJANGO_SETTINGS_MODULE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    *(f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")),
    *(f"{scheme}_PROXY" for scheme in ("HTTP", "HTTPS", "ALL", "NO")),
)


class Command(BaseCommand):
    help = (
        "Run Parley (daphne), starting the embedded model when LLM_BASE_URL is unset; with "
        "--workers N, N daphne processes behind nginx."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.getenv("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.getenv("PORT", "8000")))
        parser.add_argument("--workers", type=int, default=settings.PARLEY_WORKERS)
        parser.add_argument(
            "--socket", default="", help="listen on this unix socket instead (serve's workers)"
        )

    def handle(
        self, *args: Any, host: str, port: int, workers: int, socket: str, **options: Any
    ) -> None:
        if workers < 1:
            raise CommandError("--workers must be 1 or more.")
        nginx_path = check_several(workers) if workers > 1 else None
        # Without its Redis the chat's events cannot flow: say so now, not by hanging later.
        problem = redis_problem(settings.REDIS_URL) if settings.REDIS_URL else None
        if problem:
            raise CommandError(problem)
        allow_host(host)
        model: EmbeddedModel | None = None
        if not settings.LLM_BASE_URL:
            model = self.start_model()
        watch = None if model is None else ModelWatch(model, self.stderr.write)
        try:
            if nginx_path is None:
                if options["verbosity"]:  # a worker of serve --workers says nothing of its own
                    self.stdout.write(f"Parley is serving on http://{nginx.address(host, port)}/")
                    self.advise(host)
                run_daphne(host, port, watch, socket)
            else:
                self.serve_several(workers, host, port, nginx_path, watch)
        finally:
            if watch is not None:
                watch.stop()
            if model is not None:
                model.stop()
        if watch is not None and watch.failed:
            raise CommandError(f"Parley stopped: {watch.failed}")

    def advise(self, host: str) -> None:
        """On every interface, browsers come by names serve cannot know: say what they need."""
        if host.strip("[]") in WILDCARDS and "ALLOWED_HOSTS" not in os.environ:
            self.stdout.write(
                "Reached from other machines, it answers only the names in ALLOWED_HOSTS "
                "(set it to this machine's name or address), and over plain HTTP it needs "
                "SECURE_COOKIES=false for signing in."
            )

    def start_model(self) -> EmbeddedModel:
        self.stdout.write("Starting the embedded model (SmolLM2-135M-Instruct, llama.cpp)…")
        try:
            model = EmbeddedModel().start()
        except EmbeddedModelError as exc:
            raise CommandError(str(exc)) from exc
        settings.LLM_BASE_URL = model.base_url
        settings.LLM_EMBEDDED = True
        self.stdout.write(f"Embedded model ready at {model.base_url}")
        return model

    def serve_several(
        self, count: int, host: str, port: int, nginx_path: str, watch: ModelWatch | None
    ) -> None:
        with (
            tempfile.TemporaryDirectory(prefix="parley-nginx-") as var,
            tempfile.TemporaryDirectory(prefix="parley-workers-") as private,
        ):
            sockets = [Path(private) / f"worker-{n}.sock" for n in range(1, count + 1)]
            environment = worker_environment(count)
            workers = [
                Worker(f"worker {n}", worker_command(s), environment, settings.BASE_DIR, s)
                for n, s in enumerate(sockets, 1)
            ]
            nginx.let_in(Path(private))
            # Started as root, nginx's workers run as another user, and keep their temporary
            # files (large bodies and answers) here too.
            os.chmod(var, 0o755)
            proxy = nginx.Proxy(
                listen=nginx.address(host, port),
                workers=[f"unix:{path}" for path in sockets],
                static_root=Path(settings.STATIC_ROOT),
                var=Path(var),
                trusted=nginx.trusted_networks(settings.PARLEY_TRUSTED_PROXIES),
            )
            proxy.write_config()
            front = Child("nginx", proxy.command(nginx_path), plain_environment(), Path(var))
            for worker in workers:
                self.stdout.write(f"{worker.name}: daphne on unix:{worker.path}")
            ready = f"Parley is serving on http://{nginx.address(host, port)}/ ({count} workers)"
            self.advise(host)
            supervisor = Supervisor(workers, front, self.stdout.write)
            if watch is not None:  # a model that cannot be kept running stops everything
                watch.start(give_up=supervisor.stopping.set)
            code = supervisor.run(ready)
        if code:
            raise CommandError("Parley stopped: a process it runs failed (see above).")


def check_several(count: int) -> str:
    """What several processes need, or a CommandError that says what is missing; nginx's path."""
    if not settings.REDIS_URL:
        raise CommandError(
            f"--workers {count} needs REDIS_URL (redis://host:6379/0): the processes pass "
            "each other the events of runs through Redis."
        )
    database = settings.DATABASES["default"]
    name = str(database.get("NAME") or "")
    in_memory = name in ("", ":memory:") or "mode=memory" in name
    if database["ENGINE"].endswith("sqlite3") and in_memory:
        raise CommandError(
            f"--workers {count} needs a database every process opens: PostgreSQL "
            "(DATABASE_URL=postgres://…) or an SQLite file, not an in-memory SQLite."
        )
    try:
        nginx.trusted_networks(settings.PARLEY_TRUSTED_PROXIES)
    except nginx.NginxConfigError as exc:
        raise CommandError(str(exc)) from None
    found = nginx.find_nginx(settings.PARLEY_NGINX)
    if found is None:
        raise CommandError(
            f"--workers {count} runs nginx in front of the processes, and "
            f"{settings.PARLEY_NGINX or 'nginx'} was not found (Debian: apt-get install nginx)."
        )
    return found


def allow_host(host: str) -> None:
    """The address serve listens on is a name browsers use for it: unless ALLOWED_HOSTS is set,
    it joins the loopback names allowed by default (not an address meaning every interface)."""
    name = host.strip("[]")
    if "ALLOWED_HOSTS" in os.environ or name in WILDCARDS:
        return
    allowed = f"[{name}]" if ":" in name else name
    if allowed.lower() not in (entry.lower() for entry in settings.ALLOWED_HOSTS):
        # In place: the chat socket's origin check holds this list from when it was made.
        settings.ALLOWED_HOSTS.append(allowed)


def worker_command(path: Path) -> list[str]:
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    options = ["--workers", "1", "--socket", str(path), "--verbosity", "0"]
    return [sys.executable, manage, "serve", *options]


def worker_environment(workers: int) -> dict[str, str]:
    """Parley's settings (those project.settings reads), minus serve's own, and what Python
    needs; the model and hosts this serve uses, its key's file (the key itself only when the
    environment gave it), nginx's headers, and how many `workers` share the host. Nothing else
    of this environment."""
    passed_on = (settings.ENVIRONMENT_NAMES | set(PYTHON_ENVIRONMENT)) - set(NOT_FOR_WORKERS)
    env = plain_environment(*PYTHON_PREFIXES)
    env.update({name: os.environ[name] for name in passed_on if name in os.environ})
    env["LLM_BASE_URL"] = settings.LLM_BASE_URL
    # The hosts serve allowed, and the key it uses (perhaps made for it): every process the same.
    env["ALLOWED_HOSTS"] = ",".join(settings.ALLOWED_HOSTS)
    # Each paces its answers' pieces by the host's load (see sessions_app/engine/coalesce.py).
    env["PARLEY_WORKERS"] = str(workers)
    if not os.environ.get("SECRET_KEY"):
        # Read from its file, as serve read it: a key in the environment is readable in
        # /proc/<pid>/environ and inherited by every process a worker starts.
        env.pop("SECRET_KEY", None)
        env["SECRET_KEY_FILE"] = str(Path(settings.SECRET_KEY_FILE).resolve())
    if settings.LLM_EMBEDDED:
        env["PARLEY_LLM_EMBEDDED"] = "true"
    # Reachable on loopback only, through nginx, which sets these two headers and no other:
    # a scheme header of the operator's would pass on whatever a client sent in it.
    env["PARLEY_PROXY_HEADERS"] = "true"
    env["PROXY_SSL_HEADER"] = "X-Forwarded-Proto"
    return env


def run_daphne(host: str, port: int, watch: ModelWatch | None = None, path: str = "") -> None:
    """daphne in this process, on the endpoint of serving.listening. Once its loop runs, the run
    engine starts, its heartbeat's first beat reaping the runs of processes that died; before
    the loop stops (SIGTERM, SIGINT), the engine stops, storing the answers streaming here.
    A model that cannot be kept running (`watch`) stops daphne as SIGTERM would. With `path`,
    on that unix socket instead of host:port."""
    warm_before_listening()
    # A call of the reactor's loop (its first turn), not one before it runs, like callWhenRunning.
    reactor.callLater(0, engine.lifespan.start, reap_now=True)
    if watch is not None:
        watch.start(give_up=lambda: reactor.callFromThread(stop_reactor))
    reactor.addSystemEventTrigger("before", "shutdown", stop_engine)
    limits = daphne_socket_limits(settings.PARLEY_MAX_SOCKET_MESSAGE_BYTES)
    endpoint = daphne_unix_endpoint(path) if path else daphne_endpoint(host, port)
    arguments = ["--endpoint", endpoint, *limits]
    if settings.PARLEY_PROXY_HEADERS:
        arguments.append("--proxy-headers")
    CommandLineInterface().run([*arguments, "project.asgi:application"])


def warm_before_listening() -> None:
    """On daphne's loop, before daphne listens on it (see serving.warmup)."""
    import project.asgi  # noqa: F401 (the application, tuned: its request threads made)

    twisted_loop.run_until_complete(warmup.warm())


def stop_engine() -> defer.Deferred:
    """The engine's graceful stop, which the reactor waits for before it stops its loop."""
    return defer.Deferred.fromFuture(asyncio.ensure_future(engine.lifespan.stop()))


def stop_reactor() -> None:
    if reactor.running:
        with contextlib.suppress(ReactorNotRunning):  # already stopping
            reactor.stop()
