"""Serve Parley: the embedded model when no endpoint is set, then daphne; both stop together."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from project.listening import daphne_endpoint, daphne_socket_limits
from sessions_app.engine.liveness import reap_stale_runs
from sessions_app.llm.embedded import EmbeddedModel, EmbeddedModelError


class Command(BaseCommand):
    help = "Run Parley (daphne), starting the embedded model when LLM_BASE_URL is unset."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.getenv("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.getenv("PORT", "8000")))

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        model: EmbeddedModel | None = None
        if not settings.LLM_BASE_URL:
            self.stdout.write("Starting the embedded model (SmolLM2-135M-Instruct, llama.cpp)…")
            try:
                model = EmbeddedModel().start()
            except EmbeddedModelError as exc:
                raise CommandError(str(exc)) from exc
            settings.LLM_BASE_URL = model.base_url
            settings.LLM_EMBEDDED = True
            os.environ["LLM_BASE_URL"] = model.base_url
            self.stdout.write(f"Embedded model ready at {model.base_url}")
        try:
            reaped = reap_stale_runs()
            if reaped:
                self.stdout.write(f"Marked {reaped} unfinished run(s) as interrupted.")
            self.stdout.write(f"Parley is serving on http://{host}:{port}/")
            from daphne.cli import CommandLineInterface

            limits = daphne_socket_limits(settings.PARLEY_MAX_SOCKET_MESSAGE_BYTES)
            CommandLineInterface().run(
                ["--endpoint", daphne_endpoint(host, port), *limits, "project.asgi:application"]
            )
        finally:
            if model is not None:
                model.stop()
