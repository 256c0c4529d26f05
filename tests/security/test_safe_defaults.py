"""Safe by default: a fresh installation, started as `make run` starts it, shows no debug page,
signs its cookies with a key of its own made once for every process, and lets a person sign in
over plain HTTP on loopback."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from testkit.parley import ParleyProcess
from tests.conftest import ROOT, subprocess_env

# -- a fresh installation -------------------------------------------------------------------------


def clean_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Nothing of the caller's settings; the generated key kept in this test's directory."""
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "SECRET_KEY_FILE": str(tmp_path / "var" / "secret_key"),
        **extra,
    }


SHOW_SETTINGS = (
    "import json\nfrom django.conf import settings as s\n"
    "print(json.dumps([s.DEBUG, s.SECRET_KEY, s.DEV_SECRET_KEY]))\n"
)


def start_loading(env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", SHOW_SETTINGS]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def loaded(process: subprocess.Popen[str]) -> list:
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    return json.loads(out)


def test_a_fresh_installation_has_debug_off_and_a_key_of_its_own(tmp_path):
    env = clean_environment(tmp_path)
    # Several processes starting together, as `serve --workers` and its neighbours do.
    together = [loaded(p) for p in [start_loading(env) for _ in range(4)]]
    later = loaded(start_loading(env))

    debug, key, development_key = later
    assert debug is False
    assert key != development_key and len(key) >= 50
    assert {k for _, k, _ in together} == {key}, "every process signs with the same key"
    kept = tmp_path / "var" / "secret_key"
    assert kept.read_text().strip() == key
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert list(kept.parent.iterdir()) == [kept], "no temporary file is left behind"


def test_a_set_secret_key_is_used_and_no_file_is_made(tmp_path):
    _, key, _ = loaded(start_loading(clean_environment(tmp_path, SECRET_KEY="k" * 50)))
    assert key == "k" * 50
    assert not (tmp_path / "var" / "secret_key").exists()


WORKER_SEES = """
import django, json, subprocess, sys
django.setup()
from django.conf import settings
from serving.management.commands.serve import allow_host, worker_environment
allow_host("127.0.0.2")
child = subprocess.run(
    [sys.executable, "-c", sys.argv[1]], env=worker_environment(2), capture_output=True, text=True
)
print(json.dumps({"serve": settings.SECRET_KEY, "worker": child.stdout, "error": child.stderr}))
"""
WORKER_SETTINGS = (
    "import json, os\nfrom django.conf import settings as s\n"
    "print(json.dumps([s.SECRET_KEY, s.ALLOWED_HOSTS, os.environ.get('SECRET_KEY')]))"
)


def seen_by_serve_and_a_worker(env: dict[str, str]) -> tuple[str, list]:
    """serve's key, and the worker's key, hosts and SECRET_KEY variable."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SEES, WORKER_SETTINGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["worker"], seen["error"]
    return seen["serve"], json.loads(seen["worker"])


def test_serves_workers_read_its_key_from_its_file_not_the_environment(tmp_path):
    """The key in a worker's environment would be readable in /proc/<pid>/environ, and passed on
    to every process it starts: the workers read the file serve read."""
    serve_key, (worker_key, _, worker_variable) = seen_by_serve_and_a_worker(
        clean_environment(tmp_path)
    )
    assert worker_key == serve_key
    assert worker_variable is None


def test_serves_workers_get_the_key_the_operator_set_as_it_came(tmp_path):
    env = clean_environment(tmp_path, SECRET_KEY="operator-key-" + "k" * 40)
    serve_key, (worker_key, _, worker_variable) = seen_by_serve_and_a_worker(env)
    assert serve_key == worker_key == worker_variable == "operator-key-" + "k" * 40
    assert not (tmp_path / "var" / "secret_key").exists()


def test_serves_workers_sign_with_its_key_and_allow_its_host(tmp_path):
    serve_key, (worker_key, worker_hosts, _) = seen_by_serve_and_a_worker(
        clean_environment(tmp_path)
    )
    assert worker_key == serve_key
    assert "127.0.0.2" in worker_hosts and "localhost" in worker_hosts


# -- `make run`'s shape: serve, static files collected, nothing else set --------------------------


def signed_in_over_http(base_url: str, username: str, password: str) -> httpx.Response:
    """Sign in as a client that keeps Secure cookies to itself over plain HTTP (Python's cookie
    jar, like some browsers); the chat page it then gets."""
    with httpx.Client(base_url=base_url, timeout=30) as browser:
        form = browser.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        fields = {"username": username, "password": password, "csrfmiddlewaretoken": token}
        answer = browser.post("/accounts/login/", data=fields, headers={"Referer": str(form.url)})
        assert answer.status_code == 302, answer.text[:2000]
        return browser.get("/")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_serve_on_its_defaults_hides_debug_pages_and_signs_in_over_http(tmp_path, alice, upstream):
    env = subprocess_env(
        LLM_BASE_URL=upstream.base_url,
        STATIC_ROOT=str(tmp_path / "static"),
        SECRET_KEY_FILE=str(tmp_path / "secret_key"),
    )
    for name in ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_COOKIES"):
        env.pop(name, None)
    # An address of loopback other than the default one, as HOST=… make run would serve on.
    parley = ParleyProcess(env, host="127.0.0.2")
    parley.manage("collectstatic", "--noinput", "-v0")
    with parley:
        missing = httpx.get(parley.url("/no-such-page/"), timeout=30)
        assert missing.status_code == 404, missing.text[:500]
        assert "URLconf" not in missing.text and "DEBUG" not in missing.text
        script = httpx.get(parley.url("/static/parley/chat.js"), timeout=30)
        assert script.status_code == 200
        assert script.content == (ROOT / "static" / "parley" / "chat.js").read_bytes()

        chat = signed_in_over_http(parley.base_url, "alice", "alice-pass-123")

    assert chat.status_code == 200 and 'data-testid="chat-input"' in chat.text
