"""The chat pages and their htmx fragments, through Django's test client."""

from __future__ import annotations

import re
from html import unescape

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from sessions_app.engine import liveness
from sessions_app.models import Message, Run, RunStatus, Session
from testkit.upstream import Reply
from tests.support.apiclient import asgi_client
from tests.support.processes import a_dead_worker

pytestmark = pytest.mark.django_db


def make_session(user, agent, name="", turns=(("hi", "hello"),), status=RunStatus.COMPLETED):
    session = Session.objects.create(user=user, agent=agent, session_name=name)
    for position, (question, answer) in enumerate(turns, start=1):
        run = Run.objects.create(
            session=session,
            user=user,
            agent=agent,
            position=position,
            status=status,
            input=question,
            content=answer,
            output_tokens=3,
            duration=0.5,
            time_to_first_token=0.1,
        )
        Message.objects.create(run=run, session=session, order=0, role="user", content=question)
        Message.objects.create(run=run, session=session, order=1, role="assistant", content=answer)
    return session


def make_sessions(user, agent, count):
    """`count` chats, each active a moment after the one before."""
    return [make_session(user, agent, name=f"chat {n:02d}", turns=()) for n in range(count)]


@pytest.fixture
def alice_client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def test_the_chat_page_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_a_session_page_shows_its_history_rendered_and_sanitized(alice, agent, alice_client):
    session = make_session(
        alice,
        agent,
        name="Greetings",
        turns=[("hi", "**Hello** <script>alert(1)</script> <img src=x onerror=alert(1)>")],
    )
    response = alice_client.get(f"/s/{session.session_id}/")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="session-title"' in body and "Greetings" in body
    assert "<strong>Hello</strong>" in body
    assert "<script>alert(1)</script>" not in body and "<img src=x" not in body
    assert "&lt;script&gt;" in body
    run = session.runs.get()
    assert f'data-run-id="{run.run_id}" data-run-status="completed"' in body
    assert 'data-testid="run-metrics"' in body and "3 tokens" in body


def left_by_a_dead_process(user, agent, *, stop_asked: bool = False) -> Run:
    """A run whose process died mid-answer, as the liveness check leaves it: the text of its
    last checkpoint and no figures, since nobody counted them."""
    session = make_session(user, agent, name="Cut short", turns=())
    run = Run.objects.create(
        session=session,
        user=user,
        agent=agent,
        position=1,
        status=RunStatus.RUNNING,
        input="a long question",
        content="the answer up to its last checkpoint",
        worker=a_dead_worker(),
        heartbeat_at=timezone.now(),
        cancel_requested=stop_asked,
    )
    Message.objects.create(run=run, session=session, order=0, role="user", content=run.input)
    Message.objects.create(run=run, session=session, order=1, role="assistant", content="")
    assert liveness.reap_stale_runs() == [(run.pk, session.pk)]
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("stop_asked", [False, True])
def test_an_answer_cut_short_claims_no_token_count(alice, agent, alice_client, stop_asked):
    run = left_by_a_dead_process(alice, agent, stop_asked=stop_asked)
    body = alice_client.get(f"/s/{run.session_id}/").content.decode()
    status = "cancelled" if stop_asked else "interrupted"
    assert f'data-run-id="{run.run_id}" data-run-status="{status}"' in body
    assert "the answer up to its last checkpoint" in body
    assert "0 tokens" not in body and 'data-testid="run-metrics"' not in body


def test_a_stopped_answer_shows_the_tokens_parley_counted(alice, agent, alice_client):
    session = make_session(alice, agent, turns=(("tell me", "the start of it"),))
    session.runs.update(status=RunStatus.CANCELLED, output_tokens=4, usage_estimated=True)
    body = alice_client.get(f"/s/{session.session_id}/").content.decode()
    assert 'data-testid="run-metrics"' in body
    assert "4 tokens" in body and "estimated" in body


def test_someone_elses_session_page_is_404(alice, bob, agent, alice_client):
    session = make_session(bob, agent, name="Bob's")
    assert alice_client.get(f"/s/{session.session_id}/").status_code == 404


def test_the_sidebar_lists_only_my_sessions_newest_first(alice, bob, agent, alice_client):
    make_session(alice, agent, name="Alpha chat")
    make_session(alice, agent, name="Beta chat")
    make_session(bob, agent, name="bob's secret")
    body = alice_client.get("/").content.decode()
    assert body.index("Beta chat") < body.index("Alpha chat")
    assert "bob's secret" not in body


def listed_ids(html: str) -> list[str]:
    return re.findall(r'data-testid="session-item" data-session-id="([^"]+)"', html)


def more_link(html: str) -> str | None:
    """The sidebar's "load more" request, as htmx sends it."""
    found = re.search(r'<li class="more" hx-get="([^"]+)"', html)
    return unescape(found.group(1)) if found else None


def test_the_sidebar_pages_as_you_scroll(alice, agent, alice_client):
    for n in range(35):
        make_session(alice, agent, name=f"chat {n:02d}", turns=())
    first = alice_client.get("/").content.decode()
    assert first.count('data-testid="session-item"') == 30
    assert 'class="more"' in first and "page=" not in first
    second = alice_client.get(more_link(first), HTTP_HX_REQUEST="true").content.decode()
    assert second.count('data-testid="session-item"') == 5
    assert 'class="more"' not in second
    assert "No chats yet" not in second


def test_the_sidebar_pages_through_chats_of_the_same_moment_once_each(alice, agent, alice_client):
    for n in range(65):
        make_session(alice, agent, name=f"chat {n:02d}", turns=())
    Session.objects.update(updated_at=timezone.now())  # one import, say: ties everywhere
    seen, url = [], "/sessions/"
    while url:
        page = alice_client.get(url, HTTP_HX_REQUEST="true").content.decode()
        seen += listed_ids(page)
        url = more_link(page)
    assert sorted(seen) == sorted(Session.objects.values_list("pk", flat=True))


@pytest.mark.parametrize(
    "after", ["yesterday,abc", "2025-01-01T10:00:00,abc", "2025-01-01T10:00:00+00:00,a/b", "x"]
)
def test_a_sidebar_position_no_page_wrote_is_refused_clearly(alice, agent, alice_client, after):
    response = alice_client.get("/sessions/", {"after": after})
    assert response.status_code == 400
    assert "not valid" in response.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_chats_that_become_active_while_scrolling_are_neither_repeated_nor_skip_others(
    alice, agent, upstream, settings
):
    settings.PARLEY_SESSIONS_PER_MINUTE = 0  # the chats below were all made this minute
    chats = await sync_to_async(make_sessions)(alice, agent, 35)  # oldest first
    browser = Client()
    await sync_to_async(browser.force_login)(alice)
    first = (await sync_to_async(browser.get)("/")).content.decode()
    shown = listed_ids(first)
    assert shown == [s.pk for s in reversed(chats)][:30]

    # Meanwhile, in another tab: a chat from the second page gets a new answer, a new chat starts.
    api = await sync_to_async(asgi_client)(alice)
    upstream.script(Reply("Fresh."), Reply("Hello."))
    moved = chats[2].pk
    again = await api.post("/api/runs", {"input": "And again?", "session_id": moved})
    new = await api.post("/api/runs", {"input": "A new chat"})
    assert again.status_code == new.status_code == 200

    url = more_link(first)
    while url:
        page = (await sync_to_async(browser.get)(url, HTTP_HX_REQUEST="true")).content.decode()
        shown = as_htmx_shows(shown, page)
        url = more_link(page)
    assert len(shown) == len(set(shown)), "a chat was listed twice"
    assert set(shown) == {s.pk for s in chats} | {new.json()["session_id"]}  # none missing
    # The two that became active are on top, as a reload would show them.
    assert shown[:2] == [new.json()["session_id"], moved]
    reloaded = listed_ids((await sync_to_async(browser.get)("/")).content.decode())
    assert shown[:30] == reloaded


def as_htmx_shows(shown: list[str], page: str) -> list[str]:
    """The list after htmx swaps a "load more" answer into it: each chat active since the last
    page leaves its place (`delete`) and goes on top (`afterbegin`); the page's rows follow."""
    gone = re.findall(r'<li id="session-item-([^"]+)" hx-swap-oob="delete">', page)
    on_top = re.findall(
        r'<ul hx-swap-oob="afterbegin:#session-list"><li [^>]*data-session-id="([^"]+)"', page
    )
    rows = listed_ids(page)
    for session_id in on_top:
        rows.remove(session_id)
    listing = [s for s in shown if s not in gone]
    for session_id in on_top:
        listing.insert(0, session_id)
    return listing + rows


def test_the_sidebar_search_looks_at_titles_and_message_text(alice, agent, alice_client):
    make_session(alice, agent, name="Paris trip", turns=(("flights?", "try Tuesday"),))
    make_session(alice, agent, name="Recipes", turns=(("pancakes", "eggs, milk, flour"),))
    by_title = alice_client.get("/sessions/?q=paris").content.decode()
    by_text = alice_client.get("/sessions/?q=flour").content.decode()
    assert "Paris trip" in by_title and "Recipes" not in by_title
    assert "Recipes" in by_text and "Paris trip" not in by_text
    assert "No chats match" in alice_client.get("/sessions/?q=zzz").content.decode()


def test_rename_updates_the_header_and_the_sidebar(alice, agent, alice_client):
    session = make_session(alice, agent, name="old name")
    response = alice_client.post(
        f"/s/{session.session_id}/rename", {"session_name": "  New name  "}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="session-title"' in body and "New name" in body
    assert 'hx-swap-oob="outerHTML"' in body
    session.refresh_from_db()
    assert session.session_name == "New name"
    empty = alice_client.post(f"/s/{session.session_id}/rename", {"session_name": " "})
    assert empty.status_code == 422


def test_rename_and_delete_of_someone_elses_session_are_404(alice, bob, agent, alice_client):
    session = make_session(bob, agent, name="bob's")
    assert (
        alice_client.post(f"/s/{session.session_id}/rename", {"session_name": "x"}).status_code
        == 404
    )
    assert alice_client.post(f"/s/{session.session_id}/delete").status_code == 404
    assert Session.objects.filter(pk=session.pk, session_name="bob's").exists()


def test_delete_removes_the_session_and_sends_the_browser_home(alice, agent, alice_client):
    session = make_session(alice, agent)
    response = alice_client.post(f"/s/{session.session_id}/delete", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/"
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Message.objects.filter(session_id=session.pk).exists()


def test_a_session_with_an_answer_in_progress_cannot_be_deleted(alice, agent, alice_client):
    session = make_session(alice, agent, status=RunStatus.RUNNING)
    response = alice_client.post(f"/s/{session.session_id}/delete", HTTP_HX_REQUEST="true")
    assert response.status_code == 409
    assert Session.objects.filter(pk=session.pk).exists()


def test_writes_need_the_csrf_token(alice, agent):
    session = make_session(alice, agent, name="keep")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(f"/s/{session.session_id}/delete").status_code == 403
    assert Session.objects.filter(pk=session.pk).exists()


def test_thumbs_are_stored_on_the_run_and_can_be_taken_back(alice, agent, alice_client):
    session = make_session(alice, agent)
    run = session.runs.get()
    up = alice_client.post(f"/runs/{run.run_id}/feedback", {"rating": "1"})
    assert up.status_code == 200
    assert 'data-testid="feedback-up" aria-pressed="true"' in up.content.decode()
    run.refresh_from_db()
    assert run.feedback_rating == 1 and run.feedback_at is not None
    alice_client.post(f"/runs/{run.run_id}/feedback", {"rating": "-1"})
    run.refresh_from_db()
    assert run.feedback_rating == -1
    alice_client.post(f"/runs/{run.run_id}/feedback", {"rating": "0"})
    run.refresh_from_db()
    assert run.feedback_rating is None
    assert alice_client.post(f"/runs/{run.run_id}/feedback", {"rating": "5"}).status_code == 422


def test_thumbs_on_someone_elses_run_are_404(alice, bob, agent, alice_client):
    run = make_session(bob, agent).runs.get()
    assert alice_client.post(f"/runs/{run.run_id}/feedback", {"rating": "1"}).status_code == 404
    run.refresh_from_db()
    assert run.feedback_rating is None


def test_an_htmx_sidebar_click_gets_only_the_conversation(alice, agent, alice_client):
    session = make_session(alice, agent, name="partial")
    response = alice_client.get(
        f"/s/{session.session_id}/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="pane"
    )
    body = response.content.decode()
    assert 'id="conversation"' in body and "<html" not in body
    assert 'data-testid="session-list"' not in body


def test_the_settings_panel_shows_summary_state_and_its_history(alice, agent, alice_client):
    session = make_session(alice, agent, turns=[("a", "b"), ("c", "d")])
    session.summary = {"summary": "They talked about letters.", "topics": ["alphabet"]}
    session.session_state = {"city": "Lyon"}
    session.save()
    session.runs.filter(position=1).update(session_state={"city": "Paris"})
    session.runs.filter(position=2).update(session_state={"city": "Lyon"})
    body = alice_client.get(f"/s/{session.session_id}/settings").content.decode()
    assert "They talked about letters." in body and "alphabet" in body
    assert "&quot;city&quot;: &quot;Lyon&quot;" in body
    assert body.index("Paris") < body.index("Lyon", body.index("State after each answer"))


def test_session_state_is_edited_as_validated_json(alice, agent, alice_client):
    session = make_session(alice, agent)
    saved = alice_client.post(
        f"/s/{session.session_id}/state", {"session_state": '{"name": "Ann", "age": 7}'}
    )
    assert saved.status_code == 200 and "Saved." in saved.content.decode()
    session.refresh_from_db()
    assert session.session_state == {"name": "Ann", "age": 7}

    for bad, message in (("{oops", "not valid JSON"), ("[1, 2]", "must be a JSON object")):
        refused = alice_client.post(f"/s/{session.session_id}/state", {"session_state": bad})
        assert refused.status_code == 422
        assert message in refused.content.decode()
        assert bad.replace('"', "&quot;") in refused.content.decode()  # the text is kept
    session.refresh_from_db()
    assert session.session_state == {"name": "Ann", "age": 7}


def test_someone_elses_settings_and_state_are_404(alice, bob, agent, alice_client):
    session = make_session(bob, agent)
    assert alice_client.get(f"/s/{session.session_id}/settings").status_code == 404
    response = alice_client.post(f"/s/{session.session_id}/state", {"session_state": "{}"})
    assert response.status_code == 404


def test_view_only_staff_read_someone_elses_chat_and_change_nothing(bob, agent, support):
    session = make_session(bob, agent, name="bob's", turns=[("secret plan", "noted")])
    staff = Client()
    staff.force_login(support)
    base = f"/s/{session.session_id}"
    assert "secret plan" in staff.get(f"{base}/").content.decode()
    assert staff.get(f"{base}/settings").status_code == 200
    htmx = {"HX-Request": "true"}  # as the chat page sends them: its notice shows the text
    for action, data, permission in (
        ("rename", {"session_name": "x"}, "change session"),
        ("state", {"session_state": '{"a": 1}'}, "change session"),
        ("delete", {}, "delete session"),
    ):
        refused = staff.post(f"{base}/{action}", data, headers=htmx)
        assert refused.status_code == 403
        assert refused.content.decode() == f"You need the “{permission}” permission."
    page = staff.post(f"{base}/delete")  # not through htmx: a page saying why
    assert page.status_code == 403 and "“delete session” permission" in page.content.decode()
    session.refresh_from_db()
    assert (session.session_name, session.session_state) == ("bob's", {})


def test_staff_reading_someone_elses_chat_are_offered_only_what_they_may_do(
    bob, agent, support, manager
):
    session = make_session(bob, agent, turns=[("secret plan", "noted")])
    path = f"/s/{session.session_id}/"
    for reader, offered in ((support, False), (manager, True)):
        client = Client()
        client.force_login(reader)
        page = client.get(path).content.decode()
        assert ('data-testid="session-rename"' in page) is offered
        assert ('data-testid="session-delete"' in page) is offered
        assert 'data-testid="chat-input"' not in page  # only bob writes in bob's chat
        assert "You are reading bob’s chat" in page
    owner = Client()
    owner.force_login(bob)
    page = owner.get(path).content.decode()
    assert all(f'data-testid="{hook}"' in page for hook in ("session-rename", "chat-input"))
    assert 'data-testid="read-only-note"' not in page


def test_staff_who_may_not_view_sessions_get_403_on_anyones_chat(bob, agent, staff):
    session = make_session(bob, agent, turns=[("secret plan", "noted")])
    client = Client()
    client.force_login(staff)  # may view runs and model calls only
    for path in (f"/s/{session.session_id}/", f"/s/{session.session_id}/settings"):
        response = client.get(path)
        assert response.status_code == 403 and b"secret plan" not in response.content


async def test_static_files_are_served_on_the_async_path(db, settings):
    from django.test import AsyncClient

    settings.WHITENOISE_USE_FINDERS = True  # from the source, as in development: not collected
    client = AsyncClient()
    found = await client.get("/static/parley/chat.js")
    assert found.status_code == 200
    assert found["Content-Type"].startswith("text/javascript")
    source = settings.BASE_DIR / "static" / "parley" / "chat.js"
    assert b"".join(found.streaming_content) == source.read_bytes()
    assert (await client.get("/static/parley/no-such-file.js")).status_code == 404
