"""Parley as deployed: two daphne processes behind nginx, on PostgreSQL and Redis.

A browser or client pointed at one worker's own port reaches that process only; the deployment's
own URL is nginx's, which shares requests between them.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections.abc import Iterator
from functools import partial

import httpx
import pytest
from django.conf import settings
from playwright.sync_api import Browser, Page, expect

from sessions_app.models import Message, Run, RunStatus, User
from testkit.parley import ParleyProcess
from testkit.upstream import Reply, ScriptedUpstream
from tests.deployed.conftest import log_in, pid_of_run
from tests.deployed.streams import StreamedRun, wait_until
from tests.e2e.conftest import ACTION_TIMEOUT_MS
from tests.support.apiclient import bearer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]

ANSWER = "[data-testid=assistant-message]"
# Every text the page's streaming answers showed, in order, per element id.
RECORD_STREAMED_TEXT = """
window.streamed = {};
new MutationObserver(() => {
  for (const el of document.querySelectorAll(".stream-text")) {
    const seen = (window.streamed[el.id] ||= []);
    if (seen[seen.length - 1] !== el.textContent) seen.push(el.textContent);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def answer_of(tokens: int) -> str:
    return "".join(f"tok{i} " for i in range(tokens))


@pytest.fixture
def open_page(deployment: ParleyProcess, browser: Browser) -> Iterator:
    """open_page(base_url, user) -> a page logged in on that server, recording streamed text.
    (The deployment first: without it, the package skips before a browser is started.)"""
    contexts = []

    def open_page(base_url: str, user: str) -> Page:
        context = browser.new_context(base_url=base_url)
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        context.add_init_script(RECORD_STREAMED_TEXT)
        contexts.append(context)
        page = context.new_page()
        log_in(page, user, f"{user}-pass-123")
        return page

    yield open_page
    for context in contexts:
        context.close()


def watch(page: Page, session_id: str) -> None:
    page.goto(f"/s/{session_id}/")
    # Send is enabled once the page's socket is open and watching the session.
    expect(page.get_by_test_id("chat-send")).to_be_enabled()


def send(page: Page, text: str) -> None:
    expect(page.get_by_test_id("chat-send")).to_be_enabled()
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("chat-input").press("Enter")


def new_session(base_url: str, user: User) -> str:
    response = httpx.post(f"{base_url}/api/sessions", json={}, headers=bearer(user))
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def streamed_texts(page: Page, run_id: str) -> list[str]:
    return page.evaluate("window.streamed")[f"run-{run_id}-text"]


def assert_shown_without_gaps_or_repeats(texts: list[str], answer: str) -> None:
    """Each text the page showed while streaming was the answer's beginning, and it grew."""
    assert texts, "the page never showed the answer streaming"
    assert all(answer.startswith(text) for text in texts), texts
    assert [len(t) for t in texts] == sorted(len(t) for t in texts), texts
    assert any(0 < len(text) < len(answer) for text in texts), "never shown partly"


def test_pages_the_api_and_static_files_answer_through_nginx(deployed: ParleyProcess, alice: User):
    with httpx.Client(base_url=deployed.base_url) as client:
        login = client.get("/accounts/login/")
        assert login.status_code == 200
        assert login.headers["server"].startswith("nginx")
        assert 'name="csrfmiddlewaretoken"' in login.text
        stylesheet = re.search(r'href="(/static/[^"]+\.css)"', login.text)
        assert stylesheet is not None, login.text
        css = client.get(stylesheet.group(1))
        assert css.status_code == 200
        assert css.headers["content-type"] == "text/css"
        # nginx's own answer from STATIC_ROOT (WhiteNoise, in daphne, would say max-age=60).
        assert css.headers["cache-control"] == "max-age=3600"
        agents = client.get("/api/agents", headers=bearer(alice))
        assert agents.status_code == 200
        assert [agent["name"] for agent in agents.json()["data"]] == ["Assistant"]
        assert client.get("/healthz").json() == {"db": "ok", "channel_layer": "ok", "llm": "ok"}
        assert client.get("/api/agents").status_code == 401


def login_seen_as_https(deployed: ParleyProcess, source: str) -> bool:
    """Whether Django took a login form posted from `source` (a loopback address) with
    X-Forwarded-Proto: https for HTTPS: its CSRF check then wants a Referer of this site, as it
    does of HTTPS requests only; over plain HTTP it passes, and the form refuses the user."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=deployed.base_url, transport=transport) as client:
        form = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token is not None
        data = {"csrfmiddlewaretoken": token.group(1), "username": "nobody", "password": "x"}
        assert client.post("/accounts/login/", data=data).status_code == 200
        https = {"X-Forwarded-Proto": "https"}
        status = client.post("/accounts/login/", data=data, headers=https).status_code
        assert status in (200, 403)
        if status == 403:
            site = deployed.base_url.removeprefix("http://")
            referred = {**https, "Referer": f"https://{site}/"}
            assert client.post("/accounts/login/", data=data, headers=referred).status_code == 200
        return status == 403


def test_django_sees_the_scheme_a_trusted_proxy_reports(deployed: ParleyProcess):
    """One on this machine (a TLS proxy on loopback), or one at PARLEY_TRUSTED_PROXIES (in front
    of several hosts): nobody else."""
    assert login_seen_as_https(deployed, "127.0.0.1")
    assert login_seen_as_https(deployed, "127.0.0.9")  # TRUSTED_PROXIES
    assert not login_seen_as_https(deployed, "127.0.0.5")


def logged_lines(deployed: ParleyProcess, text: str) -> list[str]:
    return [line for line in deployed.output().splitlines() if text in line]


def test_parley_logs_the_client_a_trusted_proxy_names(deployed: ParleyProcess):
    """The address that throttles and the access log go by: the one a trusted proxy says it
    passes on, else the peer's own."""
    for source, seen in (("127.0.0.9", "203.0.113.7"), ("127.0.0.5", "127.0.0.5")):
        probe = uuid.uuid4().hex
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(base_url=deployed.base_url, transport=transport) as client:
            forwarded = {"X-Forwarded-For": "203.0.113.7"}
            assert client.get(f"/healthz?{probe}", headers=forwarded).status_code == 200
        logged = wait_until(partial(logged_lines, deployed, probe), "the request in the access log")
        assert logged[0].startswith(f"{seen}:"), logged


def test_an_api_body_over_the_limit_answers_413_in_json_from_parley_or_nginx(
    deployed: ParleyProcess, alice: User
):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    with httpx.Client(base_url=deployed.base_url, headers=bearer(alice), timeout=60) as client:
        just_over = client.post("/api/sessions", content=b"x" * (limit + 1))
        assert just_over.status_code == 413
        assert just_over.json() == {"detail": f"Request body too large: at most {limit} bytes."}
        assert just_over.headers["server"].startswith("nginx")

        far_over = client.post("/api/sessions", content=b"x" * (limit + 2 * 1_048_576))
        assert far_over.status_code == 413
        assert far_over.json() == {"detail": "Request body too large."}


def test_a_chat_through_nginx_streams_over_its_websocket(
    open_page, deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    upstream.script(Reply(tokens=30, delay=0.05))
    page = open_page(deployed.base_url, "alice")
    send(page, "Count for me")
    answer = page.locator(ANSWER)
    expect(answer).to_contain_text("tok3")
    expect(answer).to_have_attribute("data-run-status", "completed")
    expect(answer.locator(".bubble")).to_have_text(answer_of(30).strip())


def test_a_page_on_one_process_follows_a_run_started_through_the_other(
    open_page, deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    here, there = deployed.worker_urls()
    upstream.script(Reply(tokens=80, delay=0.05))
    session_id = new_session(there, alice)
    page = open_page(here, "alice")
    watch(page, session_id)

    run = StreamedRun(there, bearer(alice), input="Count to eighty", session_id=session_id)
    answer = page.locator(ANSWER)
    expect(answer).to_have_attribute("data-run-id", run.run_id)
    expect(answer).to_contain_text("tok3")
    expect(answer).to_have_attribute("data-run-status", "completed")
    run.join()
    assert run.kinds()[-1] == "RunCompleted"
    expected = answer_of(80)
    assert run.content() == expected
    expect(answer.locator(".bubble")).to_have_text(expected.strip())
    assert_shown_without_gaps_or_repeats(streamed_texts(page, run.run_id), expected)


def test_a_reload_landing_on_the_other_process_resumes_the_answer(
    open_page, deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    first, second = deployed.worker_urls()
    upstream.script(Reply(tokens=80, delay=0.05))
    page = open_page(first, "alice")
    send(page, "Take your time")
    answer = page.locator(ANSWER)
    expect(answer).to_contain_text("tok5")
    assert answer.get_attribute("data-run-status") == "running"
    run_id = answer.get_attribute("data-run-id")
    # The same page again, served this time by the process that is not streaming the answer.
    page.goto(second + page.url.removeprefix(first))
    answer = page.locator(ANSWER)
    expect(answer).to_have_attribute("data-run-status", "completed")
    expected = answer_of(80)
    expect(answer.locator(".bubble")).to_have_text(expected.strip())
    assert_shown_without_gaps_or_repeats(streamed_texts(page, run_id), expected)
    assert Run.objects.get(pk=run_id).content == expected


def test_a_run_is_stopped_from_the_other_process(
    deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    streaming, other = deployed.worker_urls()
    upstream.script(Reply(tokens=400, delay=0.05))
    run = StreamedRun(streaming, bearer(alice), input="Talk for a long time")
    run.wait_for(3)
    cancel = httpx.post(f"{other}/api/runs/{run.run_id}/cancel", headers=bearer(alice))
    assert cancel.status_code == 200, cancel.text
    run.join()
    assert run.kinds()[-1] == "RunCancelled"
    stopped = run.events[-1][1]["content"]
    assert stopped.startswith("tok0 tok1 tok2 ") and stopped != answer_of(400)
    stored = httpx.get(f"{other}/api/runs/{run.run_id}", headers=bearer(alice)).json()
    assert (stored["status"], stored["content"]) == ("CANCELLED", stopped)


def test_one_run_at_a_time_per_session_across_processes(
    deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    one, other = deployed.worker_urls()
    upstream.script(Reply(tokens=400, delay=0.05))
    first = StreamedRun(one, bearer(alice), input="a long answer")
    first.wait_for(1)
    second = httpx.post(
        f"{other}/api/runs",
        json={"input": "and another", "session_id": first.session_id},
        headers=bearer(alice),
    )
    assert second.status_code == 409
    assert second.json() == {"detail": "A run is already in progress in this session."}
    httpx.post(f"{one}/api/runs/{first.run_id}/cancel", headers=bearer(alice))
    first.join()
    third = httpx.post(
        f"{other}/api/runs",
        json={"input": "now then", "session_id": first.session_id},
        headers=bearer(alice),
        timeout=30,
    )
    assert third.status_code == 200, third.text
    assert (third.json()["status"], third.json()["content"]) == ("COMPLETED", "Echo: now then")


def test_server_sent_events_pass_through_nginx_as_they_come(
    deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    # One piece, then the model says nothing more (the run would time out after LLM_READ_TIMEOUT):
    # a proxy buffering the response would pass the first events on only with the last.
    upstream.script(Reply(tokens=2, delay=600))
    run = StreamedRun(deployed.base_url, bearer(alice), input="one word, then think hard")
    run.wait_for(1)
    assert run.content() == "tok0 "
    assert upstream.active_streams == 1, "the model's stream had ended"
    assert run.kinds() == ["RunStarted", "RunContent"]
    assert run.response_headers is not None
    assert run.response_headers["content-type"].startswith("text/event-stream")
    httpx.post(f"{deployed.base_url}/api/runs/{run.run_id}/cancel", headers=bearer(alice))
    run.join()
    assert run.kinds() == ["RunStarted", "RunContent", "RunCancelled"]
    assert [data["seq"] for _, data in run.events] == [1, 2, 3]


def test_a_worker_killed_mid_answer_leaves_an_interrupted_run_and_a_usable_session(
    open_page, deployed: ParleyProcess, alice: User, upstream: ScriptedUpstream
):
    doomed, survivor = deployed.worker_urls()
    upstream.script(Reply(tokens=2000, delay=0.05))
    session_id = new_session(survivor, alice)
    page = open_page(survivor, "alice")
    watch(page, session_id)
    run = StreamedRun(doomed, bearer(alice), input="Tell me everything", session_id=session_id)
    answer = page.locator(ANSWER)
    expect(answer).to_contain_text("tok5")
    wait_until(lambda: Run.objects.get(pk=run.run_id).content, "a checkpoint")
    os.kill(pid_of_run(run.run_id), signal.SIGKILL)

    # Nobody sends, stops or reloads: a live process notices, and the page is told.
    bound = settings.PARLEY_HEARTBEAT_INTERVAL + settings.PARLEY_STALE_RUN_AFTER
    expect(answer).to_have_attribute("data-run-status", "interrupted", timeout=bound * 1000)
    stored = Run.objects.get(pk=run.run_id)
    assert stored.status == RunStatus.INTERRUPTED
    assert stored.error == "The server stopped before this answer finished."
    kept = stored.content
    assert kept and answer_of(2000).startswith(kept)
    assert [(m.role, m.content) for m in Message.objects.filter(run=stored).order_by("order")] == [
        ("user", "Tell me everything"),
        ("assistant", kept),
    ]
    expect(answer.locator(".bubble")).to_have_text(kept.strip())
    run.join()
    assert run.error is not None, "the killed process's stream ended cleanly"

    # The session goes on, and serve has started the killed worker again.
    send(page, "Are you still there?")
    expect(page.locator(ANSWER).nth(1)).to_have_attribute("data-run-status", "completed")
    expect(page.locator(ANSWER).nth(1)).to_have_text(re.compile("Echo: Are you still there"))
    wait_until(lambda: "(killed by SIGKILL); starting it again." in deployed.output(), "restart")
    wait_until(lambda: _answers(f"{doomed}/healthz"), "the restarted worker")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
