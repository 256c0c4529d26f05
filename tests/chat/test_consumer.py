"""The chat WebSocket, frame by frame, through the real ASGI stack (origin check, auth, routing)."""

from __future__ import annotations

import asyncio
import html
import json
import re

import pytest
from channels.testing import WebsocketCommunicator

from project.asgi import application
from sessions_app.models import Run, RunStatus, Session
from testkit.upstream import Reply
from tests.support.chattab import cookie_for, open_tab
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


def final_status(frame: str, run_id: str) -> str:
    match = re.search(rf'id="run-{run_id}"[^>]*data-run-status="(\w+)"', frame)
    return match.group(1) if match else ""


async def test_an_anonymous_socket_is_closed_with_4401(upstream):
    communicator = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://testserver")]
    )
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_output(timeout=2) == {"type": "websocket.close", "code": 4401}


@pytest.mark.parametrize(
    "origin",
    [b"http://evil.example", b"http://testserver.evil.example", b"null", None],
    ids=["foreign", "lookalike", "null", "none"],
)
async def test_a_socket_from_a_foreign_origin_is_refused(alice, upstream, origin):
    headers = [(b"cookie", await cookie_for(alice))]
    if origin is not None:
        headers.append((b"origin", origin))
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()  # as a server does once it closed a socket


async def test_a_socket_from_the_sites_own_origin_on_any_port_is_accepted(alice, upstream):
    tab = await open_tab(alice, origin=b"https://testserver:8443")
    await tab.send(action="no-such-action")
    assert "Unknown action." in await tab.until("Unknown action.")
    await tab.close()


async def test_a_first_message_creates_a_session_and_streams_the_answer(alice, agent, upstream):
    upstream.script(Reply("Hello <b>Alice</b>, **welcome**.", first_delay=0.3, delay=0.01))
    tab = await open_tab(alice)
    await tab.send(action="send", session_id="", input="Hi!")
    started = await tab.until('data-testid="user-message"')
    assert "Hi!" in started
    run = await Run.objects.select_related("session").aget(session__user=alice)
    marker = await tab.until('id="composer-session"')
    assert f'value="{run.session_id}"' in marker
    assert 'data-testid="session-item"' in marker  # the sidebar gains the new chat

    done = await tab.until(f'id="run-{run.run_id}" data-testid="assistant-message"')
    done = await tab.until('data-run-status="completed"')
    # Streamed pieces were escaped text; the final answer is Markdown rendered and sanitized.
    assert tab.text_of(str(run.run_id)) == "Hello <b>Alice</b>, **welcome**."
    assert "&lt;b&gt;Alice&lt;/b&gt;" in done and "<strong>welcome</strong>" in done
    assert "<b>" not in done
    await run.arefresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.source == "chat"
    await tab.close()


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"action": "dance"}), "Unknown action."),
        (json.dumps({"action": "send", "input": "   "}), "The message is empty."),
        (json.dumps({"action": "send", "input": "x" * 32001}), "The message is too long"),
        (
            json.dumps({"action": "send", "input": "hi", "session_id": "nope"}),
            "That chat was not found.",
        ),
        (json.dumps({"action": "stop", "run_id": "nope"}), "That chat was not found."),
    ],
)
async def test_a_bad_frame_gets_an_inline_error_and_the_socket_stays_open(
    alice, agent, upstream, raw, expected
):
    tab = await open_tab(alice)
    await tab.ws.send_to(text_data=raw)
    notice = await tab.until('data-testid="chat-notice"')
    assert expected in html.unescape(notice)
    assert await Session.objects.acount() == 0
    # Still open and usable.
    await tab.send(action="send", input="now a good one")
    await tab.until('data-run-status="completed"')
    await tab.close()


async def test_someone_elses_session_is_not_found_and_its_stream_not_seen(
    alice, bob, agent, upstream
):
    upstream.script(Reply("secret answer", first_delay=0.3))
    alice_tab = await open_tab(alice)
    await alice_tab.send(action="send", input="my secret")
    await alice_tab.until('id="composer-session"')
    session = await Session.objects.aget(user=alice)

    bob_tab = await open_tab(bob)
    await bob_tab.send(action="watch", session_id=str(session.session_id))
    assert "That chat was not found." in await bob_tab.until("chat-notice")
    await bob_tab.send(action="send", session_id=str(session.session_id), input="let me in")
    await alice_tab.until('data-run-status="completed"')
    assert not any("secret answer" in frame for frame in bob_tab.frames)
    assert await Run.objects.filter(session=session).acount() == 1
    await alice_tab.close()
    await bob_tab.close()


async def test_a_second_send_while_answering_is_refused_inline(alice, agent, upstream):
    upstream.script(Reply("slow", first_delay=0.5))
    tab = await open_tab(alice)
    await tab.send(action="send", input="first")
    marker = await tab.until('id="composer-session"')
    session_id = re.search(r'value="([0-9a-f-]{36})"', marker).group(1)
    await tab.send(action="send", session_id=session_id, input="second")
    assert "already in progress" in await tab.until("chat-notice")
    await tab.until('data-run-status="completed"')
    assert await Run.objects.filter(session_id=session_id).acount() == 1
    await tab.close()


async def test_stop_cancels_the_run_and_keeps_the_partial_answer(alice, agent, upstream):
    upstream.script(Reply(tokens=200, delay=0.03))
    tab = await open_tab(alice)
    await tab.send(action="send", input="talk a lot")
    await tab.until("tok3 ")
    run = await Run.objects.aget(user=alice)
    assert 'data-testid="chat-stop"' in "".join(tab.frames)
    await tab.send(action="stop", run_id=str(run.run_id))
    final = await tab.until('data-run-status="cancelled"')
    await run.arefresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.content.startswith("tok0 ") and len(run.content.split()) < 200
    assert "Stopped." in final
    await until(lambda: upstream.disconnects >= 1, "the model's request closed")
    await tab.close()


async def test_two_tabs_on_one_session_see_the_same_stream(alice, agent, upstream):
    first = await open_tab(alice)
    await first.send(action="send", input="hello")
    marker = await first.until('id="composer-session"')
    session_id = re.search(r'value="([0-9a-f-]{36})"', marker).group(1)
    await first.until('data-run-status="completed"')

    second = await open_tab(alice)
    await second.send(action="watch", session_id=session_id)
    await second.until('id="composer-actions"')
    upstream.script(Reply(tokens=40, delay=0.01))
    first.frames.clear()
    await first.send(action="send", session_id=session_id, input="count")
    await first.until('data-run-status="completed"')
    run = await Run.objects.aget(session_id=session_id, position=2)
    await second.until(f'data-run-id="{run.run_id}" data-run-status="completed"')
    expected = "".join(f"tok{i} " for i in range(40))
    assert first.text_of(str(run.run_id)) == second.text_of(str(run.run_id)) == expected
    await first.close()
    await second.close()


async def test_a_reconnect_mid_answer_shows_it_all_once_and_the_run_completes(
    alice, agent, upstream
):
    upstream.script(Reply(tokens=60, delay=0.02))
    tab = await open_tab(alice)
    await tab.send(action="send", input="long answer")
    marker = await tab.until('id="composer-session"')
    session_id = re.search(r'value="([0-9a-f-]{36})"', marker).group(1)
    await tab.until("tok5 ")
    await tab.close()  # the reader leaves; the answer goes on

    await asyncio.sleep(0.2)
    again = await open_tab(alice)
    await again.send(action="watch", session_id=session_id)
    await again.until('data-run-status="completed"')
    run = await Run.objects.aget(session_id=session_id)
    assert run.status == RunStatus.COMPLETED
    expected = "".join(f"tok{i} " for i in range(60))
    assert again.text_of(str(run.run_id)) == expected == run.content
    await again.close()


async def test_a_socket_closed_mid_answer_for_good_leaves_the_answer_whole_and_stored(
    alice, agent, upstream
):
    upstream.script(Reply(tokens=60, delay=0.02))
    tab = await open_tab(alice)
    await tab.send(action="send", input="long answer")
    await tab.until("tok5 ")
    await tab.close()  # the tab is gone, and nobody opens another

    run = await Run.objects.aget(user=alice)

    async def finished() -> bool:
        await run.arefresh_from_db()
        return not run.is_active

    await until(finished, "the run's end stored")
    expected = "".join(f"tok{i} " for i in range(60))
    assert (run.status, run.content) == (RunStatus.COMPLETED, expected)
    stored = [(m.role, m.content) async for m in run.messages.order_by("order")]
    assert stored == [("user", "long answer"), ("assistant", expected)]


async def test_regenerate_keeps_the_earlier_answer(alice, agent, upstream):
    upstream.script(Reply("first take"), Reply("second take"))
    tab = await open_tab(alice)
    await tab.send(action="send", input="say something")
    await tab.until('data-run-status="completed"')
    first = await Run.objects.aget(user=alice)
    tab.frames.clear()
    await tab.send(action="regenerate", run_id=str(first.run_id))
    await tab.until('data-run-status="completed"')
    contents = [r.content async for r in Run.objects.filter(user=alice).order_by("position")]
    assert contents == ["first take", "second take"]
    inputs = [r.input async for r in Run.objects.filter(user=alice).order_by("position")]
    assert inputs == ["say something", "say something"]
    await tab.close()


async def test_a_failed_answer_shows_a_readable_error_with_retry(alice, agent, upstream):
    upstream.script(Reply(status=503, error_message="overloaded"))
    tab = await open_tab(alice)
    await tab.send(action="send", input="hello?")
    final = await tab.until('data-run-status="error"')
    assert 'data-testid="run-error"' in final
    assert "The model endpoint answered 503: overloaded" in final
    assert 'data-testid="run-retry"' in final
    await tab.close()


async def test_a_generated_title_reaches_the_open_tab(alice, agent, upstream, settings):
    from sessions_app.services import memory

    tab = await open_tab(alice)
    await tab.send(action="send", input="tell me about tea")
    marker = await tab.until('id="composer-session"')
    session_id = re.search(r'value="([0-9a-f-]{36})"', marker).group(1)
    await tab.until('data-run-status="completed"')
    upstream.script(Reply("Tea Talk"))
    await memory.generate_title(session_id)
    frame = await tab.until(">Tea Talk</h1>")
    assert f'id="session-item-{session_id}"' in frame and 'hx-swap-oob="outerHTML"' in frame
    await tab.close()


async def test_sending_too_fast_is_refused_inline(alice, agent, upstream, settings):
    settings.PARLEY_RUNS_PER_MINUTE = 1
    tab = await open_tab(alice)
    await tab.send(action="send", input="one")
    await tab.until('data-run-status="completed"')
    await tab.send(action="send", input="two")
    assert "sending too fast" in await tab.until("chat-notice")
    assert await Run.objects.filter(user=alice).acount() == 1
    await tab.close()


async def test_staff_watch_and_stop_anyones_answer_only_with_the_permissions(
    alice, staff, support, agent, upstream
):
    upstream.script(Reply(tokens=60, delay=0.02))
    owner = await open_tab(alice)
    await owner.send(action="send", input="long answer")
    marker = await owner.until('id="composer-session"')
    session_id = re.search(r'value="([0-9a-f-]{36})"', marker).group(1)
    await owner.until("tok5 ")
    run = await Run.objects.aget(user=alice)

    outsider = await open_tab(staff)  # may view runs and model calls, nothing more
    await outsider.send(action="watch", session_id=session_id)
    await outsider.until("You need the “view session” permission.")
    await outsider.send(action="stop", run_id=str(run.run_id))
    await outsider.until("You need the “change run” permission.")
    assert not any("tok5 " in frame for frame in outsider.frames)

    reader = await open_tab(support)  # may view everything
    await reader.send(action="watch", session_id=session_id)
    await reader.until("tok5 ")
    await reader.send(action="stop", run_id=str(run.run_id))
    await reader.until("You need the “change run” permission.")

    await owner.until('data-run-status="completed"')
    await run.arefresh_from_db()
    assert run.status == RunStatus.COMPLETED and not run.cancel_requested
    for tab in (owner, outsider, reader):
        await tab.close()
