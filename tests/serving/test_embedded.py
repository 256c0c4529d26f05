"""The real embedded model (SmolLM2-135M-Instruct on llama.cpp), and `serve` around it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from evals_app.models import Score, Trial, TrialStatus
from serving.children import free_port
from serving.embedded import EmbeddedModel, EmbeddedModelError
from serving.nginx import find_nginx
from sessions_app import engine
from sessions_app.accounts import create_token
from sessions_app.engine.errors import CUT
from sessions_app.models import (
    Agent,
    CallKind,
    LLMCall,
    NameSource,
    Run,
    RunStatus,
    Session,
    User,
)
from sessions_app.services import memory, versions
from sessions_app.services.sessions import default_session_name
from tests.conftest import ROOT, subprocess_env
from tests.evals import factories
from tests.openai.conftest import sdk
from tests.openai.test_client_tools import WEATHER


@pytest.fixture(scope="module")
def embedded():
    with EmbeddedModel() as model:
        yield model


@pytest.fixture
def on_embedded(embedded, settings, transactional_db):
    """Parley set up as a fresh install without a key: the embedded model and its agent."""
    settings.LLM_BASE_URL = embedded.base_url
    settings.LLM_EMBEDDED = True
    settings.LLM_API_KEY = ""
    Agent.objects.update_or_create(
        is_default=True,
        defaults={"name": "Assistant", "model": "SmolLM2-135M-Instruct", "instructions": ""},
    )


@pytest.mark.django_db(transaction=True)
async def test_the_embedded_model_answers_a_run(alice, on_embedded):
    handle = await engine.start_run(alice, "What is the capital of France? Answer in one word.")
    pieces = [e["content"] async for e in handle.events() if e["event"] == "RunContent"]
    run = await handle.wait()

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.content.strip() and "".join(pieces) == run.content
    assert run.model_provider == "llama.cpp"
    # llama.cpp sends no usage when streaming: counted with its own tokenizer.
    assert run.usage_estimated is True
    assert run.input_tokens > 10 and run.output_tokens > 0
    assert run.time_to_first_token is not None and run.tokens_per_second


@pytest.mark.django_db(transaction=True)
async def test_two_users_asking_at_once_both_get_whole_answers(alice, bob, on_embedded, settings):
    # The second request arrives while the first answer streams, however long the answers;
    # a cap keeps a rambling small model from taking a minute on a loaded machine.
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 96
    first = await engine.start_run(alice, "Name three colours.")
    second = await engine.start_run(bob, "Name three animals.")
    done = [await first.wait(), await second.wait()]

    assert [run.status for run in done] == [RunStatus.COMPLETED] * 2, [r.error for r in done]
    assert all(run.content.strip() for run in done)
    # Each ended as the model ended it or at the cap.
    assert all(run.error in ("", CUT) for run in done), [r.error for r in done]


@pytest.mark.django_db(transaction=True)
async def test_a_long_answer_stops_at_the_cap_and_completes_saying_so(alice, on_embedded, settings):
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 5
    run = await (await engine.start_run(alice, "Write a long story about a dragon.")).wait()

    assert run.status == RunStatus.COMPLETED
    assert run.content.strip() and run.error == CUT
    assert run.output_tokens <= 6  # counted again with the model's tokenizer


@pytest.mark.django_db(transaction=True)
async def test_a_client_tool_the_embedded_model_calls_is_returned_and_its_result_goes_on(
    alice, on_embedded, settings
):
    # llama-cpp-python repeats the tool's name in every delta, and refuses `content: null`.
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 48
    _, key = await sync_to_async(create_token)(alice, "sdk")
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    forced = {"type": "function", "function": {"name": "get_weather"}}
    async with sdk(key) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="assistant", messages=ask, tools=[WEATHER], tool_choice=forced
        )
        first = raw.parse()
        [call] = first.choices[0].message.tool_calls
        assert (first.choices[0].finish_reason, call.function.name) == ("tool_calls", "get_weather")

        result = {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 °C"}
        history = [*ask, first.choices[0].message.model_dump(exclude_none=True), result]
        raw_next = await client.chat.completions.with_raw_response.create(
            model="assistant", messages=history, tools=[WEATHER]
        )

    answer = raw_next.parse().choices[0]
    assert answer.finish_reason in ("stop", "length") and answer.message.content.strip()
    run_id = raw.headers["X-Parley-Run-Id"]
    assert raw_next.headers["X-Parley-Run-Id"] == run_id
    run = await Run.objects.aget(pk=run_id)
    assert run.status == RunStatus.COMPLETED, run.error


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _stopped_or_where_it_hangs(server: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    """'' once `server` has exited; else its log's tail with every thread's stack, which
    faulthandler (PYTHONFAULTHANDLER) writes there on SIGABRT."""
    try:
        server.wait(timeout=timeout)
        return ""
    except subprocess.TimeoutExpired:
        server.send_signal(signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=10)
        return "\n".join(log.read_text(errors="replace").splitlines()[-80:])


@pytest.mark.model
@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_serve_on_the_port_in_PORT_starts_the_embedded_model_and_stops_it_on_ctrl_c(tmp_path):
    port = free_port()
    # PORT and HOST are Parley's; llama.cpp's server would take them too if it could see them.
    env = subprocess_env(PYTHONFAULTHANDLER="1", PORT=str(port), HOST="127.0.0.1")
    env.pop("LLM_BASE_URL")
    env.pop("LLM_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "serve"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # As in a terminal: a suite started in the background inherits SIGINT ignored,
            # and daphne then leaves it so.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        health = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and server.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert health == {"db": "ok", "channel_layer": "ok", "llm": "ok"}, log.read_text()
        children = _children(server.pid)
        assert children, "serve should run the model server as its child"

        server.send_signal(signal.SIGINT)
        # Once, on the slowest machine, it had not exited after 30 s: say where it was.
        hanging = _stopped_or_where_it_hangs(server, log, timeout=30)
        assert not hanging, f"serve did not stop within 30 s of Ctrl-C:\n{hanging}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(c) for c in children):
            time.sleep(0.2)
        assert not any(_alive(c) for c in children)
    finally:
        if server.poll() is None:
            server.kill()


def _wait_for(condition, what: str, server: subprocess.Popen[bytes], log: Path, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert server.poll() is None, f"serve exited ({server.returncode}):\n{log.read_text()}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s\n{log.read_text()}"
        time.sleep(0.2)
    return value


def _model_server(serve: int) -> int:
    """The pid of the embedded model's server that `serve` runs."""
    (found,) = [
        pid
        for pid in _children(serve)
        if b"llama_cpp.server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    return found


def _model_servers_on(url: str) -> list[int]:
    """Every model server of this machine listening where `url` says."""
    port = url.rsplit(":", 1)[1].split("/")[0].encode()
    found = []
    for entry in filter(lambda entry: entry.name.isdigit(), Path("/proc").iterdir()):
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"llama_cpp.server" in args and port in args and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workers", [1, 2], ids=["one process", "two workers"])
def test_serve_starts_the_embedded_model_again_when_it_dies_and_stops_if_it_keeps_dying(
    tmp_path, workers
):
    env = subprocess_env(PYTHONFAULTHANDLER="1")
    for name in ("LLM_BASE_URL", "LLM_API_KEY", "OPENAI_API_KEY"):
        env.pop(name, None)
    if workers > 1:
        if find_nginx() is None:
            pytest.skip("nginx is not installed")
        env["REDIS_URL"] = os.getenv("REDIS_URL") or "redis://127.0.0.1:6379/0"
    command = [sys.executable, "manage.py", "serve", "--port", str(free_port())]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*command, "--workers", str(workers)], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    killed: list[int] = []
    try:
        ready = re.compile(r"Embedded model ready at (\S+)")
        model_url = _wait_for(lambda: ready.search(log.read_text()), "ready", server, log)[1]
        again = f"Embedded model ready again at {model_url}"
        for restarts in (1, 2):
            killed.append(_model_server(server.pid))
            os.kill(killed[-1], signal.SIGKILL)
            _wait_for(lambda n=restarts: log.read_text().count(again) == n, again, server, log)
            # On the same address, which Parley (and every worker) was given.
            assert httpx.get(model_url + "/models", timeout=10).status_code == 200
        killed.append(_model_server(server.pid))
        os.kill(killed[-1], signal.SIGKILL)  # the third time in a row, right after it started
        assert server.wait(timeout=60) == 1, log.read_text()
        said = log.read_text()
        exited = "The embedded model (SmolLM2-135M-Instruct) exited (killed by SIGKILL)"
        assert said.count(f"{exited}; starting it again.") == 2
        stopped = f"{exited}, again right after it started; stopping Parley."
        assert f"CommandError: Parley stopped: {stopped}" in said
        assert not _model_servers_on(model_url), "a model server was left running"
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


# Listens on the port it is given and accepts, but never answers: a model that hangs loading.
SILENT_SERVER = """
import socket, sys
listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("loading the weights of a stand-in model", file=sys.stderr, flush=True)
held = []
while True:
    held.append(listener.accept()[0])
"""

# Writes the names of the environment variables it sees, then exits.
ENVIRONMENT_PRINTER = "import os, sys; print(' '.join(sorted(os.environ)), file=sys.stderr)"


class StandIn(EmbeddedModel):
    def __init__(self, script: str) -> None:
        super().__init__()
        self.script = script

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.script, str(self.port)]


def _start_within(model: EmbeddedModel, timeout: float, bound: float) -> BaseException | None:
    """start(timeout) in a thread; what it raised, or a failure if it still runs after `bound`."""
    raised: list[BaseException] = []

    def start() -> None:
        try:
            model.start(timeout=timeout)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(bound)
    if thread.is_alive():
        model.stop()
        pytest.fail(f"start(timeout={timeout}) still waited after {bound} s")
    return raised[0] if raised else None


def test_a_model_server_that_never_answers_fails_clearly_within_the_timeout():
    model = StandIn(SILENT_SERVER)
    error = _start_within(model, timeout=3, bound=60)
    assert isinstance(error, EmbeddedModelError)
    message = str(error)
    assert "SmolLM2-135M-Instruct" in message and "within 3 s" in message
    assert "loading the weights of a stand-in model" in message  # the server's own last words
    assert model.process is not None and model.process.poll() is not None  # and it was stopped


def test_the_model_server_sees_none_of_parleys_settings(monkeypatch):
    for name, value in {
        "PORT": "8123",
        "HOST": "0.0.0.0",
        "MODEL": "/elsewhere.gguf",
        "DATABASE_URL": "postgres://secret@db/parley",
        "SECRET_KEY": "not-for-children",
        "LLM_API_KEY": "sk-not-for-children",
    }.items():
        monkeypatch.setenv(name, value)
    error = _start_within(StandIn(ENVIRONMENT_PRINTER), timeout=30, bound=60)
    assert isinstance(error, EmbeddedModelError) and "exited with code 0" in str(error)
    seen = str(error).splitlines()[-1].split()
    assert "PATH" in seen
    assert not {"PORT", "HOST", "MODEL", "DATABASE_URL", "SECRET_KEY", "LLM_API_KEY"} & set(seen)


# Ordinary first messages of a chat, of the kinds people send; none is special to the prompt.
FIRST_MESSAGES = [
    "How do I reverse a list in Python?",
    "Can you help me write a cover letter for a junior data analyst job?",
    "What's a good recipe for banana bread without eggs?",
    "I'm going to Japan in April for two weeks. What cities should I visit?",
    "Hi! Can you explain how photosynthesis works?",
    "My JavaScript fetch call gets a CORS error when I call my API from localhost:3000. "
    "How do I fix it?",
    "What is the difference between TCP and UDP?",
    "Suggest some names for a golden retriever puppy",
    "How long should I boil an egg for a soft yolk?",
    "Write a haiku about autumn rain",
    "Hello, how do I fix a flat tire on my bike?",
    "Can you summarize the causes of World War I?",
    "What are some cheap things to do in Paris on a weekend?",
    "Why does my sourdough bread come out so dense?",
    "Explain recursion to a ten year old",
    "SQL query to find duplicate emails in a users table",
    "I need a workout plan for three days a week at the gym, I'm a beginner",
    "How do I convert Celsius to Fahrenheit?",
    "What should I pack for a hiking trip in the Alps in September?",
    "Good morning! What's a healthy breakfast I can make in five minutes?",
    "Help me write an email to my landlord about a broken heater",
    "What's the best way to learn Spanish as an adult?",
    "How do I center a div in CSS?",
    "Tips for a job interview tomorrow",
    "Can you recommend some science fiction books like Dune?",
    "¿Cuál es la mejor manera de cocinar arroz?",
    "Comment puis-je améliorer mon sommeil ?",
    "My git push is rejected with 'non-fast-forward'. What does that mean and what should I do?",
    "How do I make a budget for my first apartment?",
    "I've been working on a small Flask app that stores notes in SQLite. It works on my laptop, "
    "but on a VPS with gunicorn the notes disappear after every restart. I think it has to do "
    "with the database path. Any idea what is going on?",
]
# How a reply begins, never a title (the test's own list, not the code's).
ANSWER_OPENINGS = {
    "sure", "certainly", "absolutely", "of", "okay", "ok", "yes", "no", "well", "hello", "hi",
    "hey", "great", "thanks", "thank", "sorry", "i", "i'm", "i'd", "i'll", "here", "here's", "let",
    "let's", "as", "you", "to", "it's", "that's", "there's",
}  # fmt: skip


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'’-]+", text.lower())


def _reads_as_answer(title: str, reply: str) -> str:
    """Why `title` is part of an answer rather than a title of the question ('' if it isn't)."""
    words, said = _words(title), _words(reply)
    sentences = {" ".join(_words(s)) for s in re.split(r"(?<=[.!?:])\s+|\n+", reply)}
    if words and said[: len(words)] == words:
        return "the reply begins with it"
    if " ".join(words) in sentences:
        return "a sentence of the reply"
    if words and words[0] in ANSWER_OPENINGS:
        return "begins as an answer does"
    if re.search(r"[.!]$|[.!?]\s", title):
        return "a sentence"
    return ""


@pytest.mark.timeout(900)  # thirty answers and their titles from a model on the CPU
@pytest.mark.django_db(transaction=True)
async def test_titles_of_ordinary_first_messages_are_titles(alice, on_embedded, settings):
    settings.PARLEY_GENERATE_TITLES = True
    settings.PARLEY_RUNS_PER_MINUTE = settings.PARLEY_SESSIONS_PER_MINUTE = 0
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 24  # an answer's beginning is what a title could copy
    seen = []
    for message in FIRST_MESSAGES:
        run = await (await engine.start_run(alice, message)).wait()
        assert run.status == RunStatus.COMPLETED, run.error
        await memory.jobs.drain()
        session = await Session.objects.aget(pk=run.session_id)
        seen.append((message, session.session_name, session.name_source, run.content))
    report = "\n".join(f"{source:>13} | {title!r} <- {text!r}" for text, title, source, _ in seen)
    print(report)  # what the model named each message, for `pytest -s`

    titled = [(text, t, reply) for text, t, source, reply in seen if source == NameSource.MODEL]
    # The message's own words are what the fallback keeps: not a title from the model.
    named = [t for text, t, _ in titled if 2 <= len(t.split()) <= 7 and _words(t) != _words(text)]
    assert len(named) >= 25, f"{len(named)}/30 titles from the model:\n{report}"
    answers = [(t, why) for _, t, reply in titled if (why := _reads_as_answer(t, reply))]
    assert not answers, f"titles that read as answers: {answers}\n{report}"
    kept = [(t, text) for text, t, source, _ in seen if source != NameSource.MODEL]
    assert all(t == default_session_name(text) for t, text in kept), report
    calls = LLMCall.objects.filter(kind=CallKind.TITLE, session__user=alice, ok=True)
    assert await calls.acount() == len(titled)


def test_the_embedded_model_answers_and_judges_an_experiment(on_embedded, capsys):
    """Weak, but working: a 135M model as candidate and as judge. Every answer is stored and
    every score is a value or an error with its reason; none is lost."""
    agent = Agent.objects.create(
        name="Smol", model="SmolLM2-135M-Instruct", instructions="Answer briefly."
    )
    admin = User.objects.create_superuser("boss", password="x")
    versions.create_draft(agent, {"instructions": "Answer in one sentence."}, user=admin)
    factories.dataset_with_items("capitals", 2)
    scorers = ["contains", '{"name": "judge", "rubric": "Is the answer correct?"}', "pairwise"]
    args = ["--dataset", "capitals", "--agent", "Smol", "--agent", "Smol@draft", "--judge", "Smol"]

    call_command("evaluate", *args, *[a for s in scorers for a in ("--scorer", s)])

    report = capsys.readouterr().out
    trials = list(Trial.objects.all())
    assert len(trials) == 4 and {t.status for t in trials} == {TrialStatus.COMPLETED}
    assert all(t.content.strip() for t in trials)
    scores = list(Score.objects.all())
    assert len(scores) == 4 + 4 + 2  # contains and judge on every answer; pairwise per item
    assert all(s.value is not None or s.error for s in scores)
    # Held to the verdict's JSON schema, even this model's verdicts can be read.
    judged = [s for s in scores if s.scorer != "contains"]
    assert all(s.value is not None for s in judged), [s.error for s in judged]
    assert "Smol v1 (baseline)" in report and "pairwise" in report
