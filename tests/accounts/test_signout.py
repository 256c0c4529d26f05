"""A sign-in that ends takes effect at once: on open chat sockets, API tokens and cookies.

Signing out closes that browser's sockets and no other; a deactivated account's sockets close
and can start nothing more; a new password closes the sockets of the user's other browsers.
"""

from __future__ import annotations

import asyncio
import html
import re
import sys
import textwrap

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from project.asgi import application
from sessions_app.accounts import create_token
from sessions_app.models import Run, User
from tests.conftest import ROOT, subprocess_env
from tests.support.asgiclient import request_served

pytestmark = pytest.mark.django_db(transaction=True)

SIGNED_OUT, FORBIDDEN = 4401, 4403


async def browser(user: User) -> Client:
    """A browser signed in as `user`, with a session (and cookie) of its own."""
    client = Client()
    await sync_to_async(client.force_login)(user)
    return client


class Tab:
    """One chat socket of a browser."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.ws = communicator
        self.frames: list[str] = []

    @classmethod
    async def open(cls, client: Client) -> Tab:
        cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
        headers = [(b"origin", b"http://testserver"), (b"cookie", cookie)]
        communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await communicator.connect()
        assert connected
        return cls(communicator)

    async def send(self, **frame: str) -> None:
        await self.ws.send_json_to(frame)

    async def until(self, needle: str, timeout: float = 10.0) -> str:
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.ws.receive_from(timeout=timeout)
                self.frames.append(frame)
                if needle in frame:
                    return frame

    async def closed_with(self, timeout: float = 10.0) -> tuple[int, list[str]]:
        """The code the server closed this socket with, and the notices it said before."""
        async with asyncio.timeout(timeout):
            while True:
                output = await self.ws.receive_output(timeout=timeout)
                if output["type"] == "websocket.close":
                    notices = [html.unescape(f) for f in self.frames if "chat-notice" in f]
                    return output["code"], notices
                self.frames.append(output.get("text", ""))

    async def still_answers(self) -> None:
        await self.send(action="send", input="still there?")
        await self.until('data-run-status="completed"')

    async def close(self) -> None:
        await self.ws.disconnect()


def run_id_in(frame: str) -> str:
    return re.search(r'data-run-id="([0-9a-f-]{36})"', frame).group(1)


async def test_a_deactivated_account_s_open_sockets_are_told_and_closed_at_once(
    alice, agent, upstream
):
    first, second = await Tab.open(await browser(alice)), await Tab.open(await browser(alice))

    alice.is_active = False
    await sync_to_async(alice.save)()  # as the admin's change form does

    for tab in (first, second):
        code, notices = await tab.closed_with()
        assert code == FORBIDDEN
        assert any("Your account has been deactivated." in n for n in notices)
    assert await Run.objects.acount() == 0


@pytest.mark.parametrize("action", ["send", "regenerate", "watch", "stop"])
async def test_after_a_deactivation_written_straight_to_the_database_no_frame_is_served(
    alice, agent, upstream, action
):
    """No signal told the socket (a bulk update, an SQL statement): its next frame finds out."""
    tab = await Tab.open(await browser(alice))
    await tab.send(action="send", input="hello")
    done = await tab.until('data-run-status="completed"')
    run = await Run.objects.aget(run_id=run_id_in(done))

    await User.objects.filter(pk=alice.pk).aupdate(is_active=False)
    frames = {
        "send": {"input": "one more", "session_id": str(run.session_id)},
        "regenerate": {"run_id": str(run.run_id)},
        "watch": {"session_id": str(run.session_id)},
        "stop": {"run_id": str(run.run_id)},
    }
    await tab.send(action=action, **frames[action])

    code, notices = await tab.closed_with()
    assert code == FORBIDDEN
    assert any("Your account has been deactivated." in n for n in notices)
    assert await Run.objects.acount() == 1
    assert len(upstream.requests) == 1  # no model call went out either


def test_a_deactivated_user_s_api_tokens_answer_401_at_once(alice, agent, upstream):
    _, raw = create_token(alice)
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    client = Client()
    assert client.get("/api/sessions", **bearer).status_code == 200

    alice.is_active = False
    alice.save()

    assert client.get("/api/sessions", **bearer).status_code == 401
    token = {"Authorization": f"Bearer {raw}"}
    started = request_served("POST", "/api/runs", {"input": "hi"}, token)
    assert started.status_code == 401
    assert "Authentication required" in started.json()["detail"]
    assert not Run.objects.exists()


def test_a_deactivated_user_s_cookie_session_is_signed_out_on_the_next_request(alice):
    client = Client()
    client.force_login(alice)
    assert client.get("/api/sessions").status_code == 200

    alice.is_active = False
    alice.save()

    assert client.get("/api/sessions").status_code == 401
    assert client.get("/")["Location"] == "/accounts/login/?next=/"


@pytest.mark.parametrize(
    "who,logout", [("alice", "/accounts/logout/"), ("staff", "/admin/logout/")]
)
async def test_logging_out_closes_that_browser_s_sockets_and_no_other(
    alice, staff, agent, upstream, who, logout
):
    user = {"alice": alice, "staff": staff}[who]
    leaving, staying = await browser(user), await browser(user)
    leaving_tabs = [await Tab.open(leaving), await Tab.open(leaving)]
    staying_tab = await Tab.open(staying)

    response = await sync_to_async(leaving.post)(logout)
    assert response.status_code in (200, 302)

    for tab in leaving_tabs:
        code, notices = await tab.closed_with()
        assert code == SIGNED_OUT
        assert any("You signed out in this browser" in n for n in notices)
    await staying_tab.still_answers()
    await staying_tab.close()


async def test_a_browser_signed_in_before_this_release_is_signed_out_all_the_same(
    alice, agent, upstream
):
    from sessions_app.accounts.signout import TAG_KEY

    client = await browser(alice)

    def untag() -> None:  # as sessions signed in before sign-ins had tags
        session = client.session
        del session[TAG_KEY]
        session.save()

    await sync_to_async(untag)()
    tab = await Tab.open(client)

    await sync_to_async(client.post)("/accounts/logout/")

    assert (await tab.closed_with())[0] == SIGNED_OUT


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("boss", password="boss-pass-123")


async def change_password(client: Client, user: User, password: str) -> None:
    url = f"/admin/sessions_app/user/{user.pk}/password/"
    form = {"password1": password, "password2": password, "usable_password": "true"}
    response = await sync_to_async(client.post)(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]


async def test_a_new_password_closes_the_sockets_of_the_user_s_other_browsers(
    admin_user, agent, upstream
):
    here, elsewhere = await browser(admin_user), await browser(admin_user)
    here_tab, elsewhere_tab = await Tab.open(here), await Tab.open(elsewhere)

    await change_password(here, admin_user, "a-Brand-new-secret-42")

    code, notices = await elsewhere_tab.closed_with()
    assert code == SIGNED_OUT
    assert any("Your password was changed" in n for n in notices)
    # Django keeps the browser that changed it signed in; its socket stays open.
    await here_tab.still_answers()
    assert (await sync_to_async(here.get)("/")).status_code == 200
    await here_tab.close()


async def test_staff_changing_their_own_password_in_the_admin_keep_this_browser_s_sockets(
    admin_user, agent, upstream
):
    here, elsewhere = await browser(admin_user), await browser(admin_user)
    here_tab, elsewhere_tab = await Tab.open(here), await Tab.open(elsewhere)

    new = "a-Brand-new-secret-42"
    form = {"old_password": "boss-pass-123", "new_password1": new, "new_password2": new}
    response = await sync_to_async(here.post)("/admin/password_change/", form)
    assert response["Location"] == "/admin/password_change/done/"

    code, notices = await elsewhere_tab.closed_with()
    assert code == SIGNED_OUT
    assert any("Your password was changed" in n for n in notices)
    await here_tab.still_answers()
    assert (await sync_to_async(here.get)("/")).status_code == 200
    await here_tab.close()


async def test_a_password_changed_by_staff_closes_all_the_user_s_sockets(
    admin_user, alice, agent, upstream
):
    alice_tab = await Tab.open(await browser(alice))

    await change_password(await browser(admin_user), alice, "a-Brand-new-secret-42")

    code, _ = await alice_tab.closed_with()
    assert code == SIGNED_OUT


async def test_saving_other_fields_of_the_account_closes_nothing(alice, agent, upstream):
    tab = await Tab.open(await browser(alice))
    alice.email = "alice@example.com"
    alice.allow_training = False
    await sync_to_async(alice.save)()
    await tab.still_answers()
    await tab.close()


@pytest.mark.services  # the machine's Redis
async def test_saving_other_fields_of_the_account_tells_the_other_processes_nothing(
    alice, settings
):
    """Other processes hear of a save only when it can end a sign-in: listening as one does,
    the first word they get after an e-mail change is the deactivation that follows it."""
    from channels.layers import get_channel_layer

    from serving import layers
    from sessions_app.accounts.signout import user_group
    from tests.engine.test_realtime_redis import REDIS_URL, redis_available

    if not redis_available():
        pytest.skip(f"no Redis at {REDIS_URL}")
    settings.CHANNEL_LAYERS = {"default": layers.redis_layer(REDIS_URL)}
    layer = get_channel_layer()
    channel, group = await layer.new_channel(), user_group(alice.pk)
    await layer.group_add(group, channel)
    ours = alice.get_session_auth_hash()  # tests elsewhere may have a user of this key too
    try:
        alice.email = "alice@example.com"
        alice.allow_training = False
        await sync_to_async(alice.save)()  # as the account settings form and the admin do
        alice.is_active = False
        await sync_to_async(alice.save)()

        async with asyncio.timeout(10):
            while (heard := await layer.receive(channel))["auth_hash"] != ours:
                pass
        assert heard["active"] is False
    finally:
        await layer.group_discard(group, channel)


OTHER_PROCESS = textwrap.dedent(
    """
    import django, sys
    django.setup()
    from django.test import Client
    from sessions_app.models import User

    what, cookie = sys.argv[1], sys.argv[2]
    if what == "logout":
        client = Client()
        client.cookies["sessionid"] = cookie
        assert client.post("/accounts/logout/").status_code == 302
    else:
        alice = User.objects.get(username="alice")
        alice.is_active = False
        alice.save()
    """
)


@pytest.mark.services  # the machine's Redis
@pytest.mark.parametrize("what,code", [("logout", SIGNED_OUT), ("deactivate", FORBIDDEN)])
async def test_a_sign_in_ended_in_another_process_closes_the_socket_here(
    alice, agent, upstream, settings, what, code
):
    from serving import layers
    from tests.engine.test_realtime_redis import REDIS_URL, redis_available

    if not redis_available():
        pytest.skip(f"no Redis at {REDIS_URL}")
    settings.CHANNEL_LAYERS = {"default": layers.redis_layer(REDIS_URL)}
    client = await browser(alice)
    tab = await Tab.open(client)

    env = subprocess_env(DJANGO_SETTINGS_MODULE="project.settings", REDIS_URL=REDIS_URL)
    cookie = client.cookies["sessionid"].value
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OTHER_PROCESS, what, cookie, cwd=ROOT, env=env
    )
    assert await asyncio.wait_for(child.wait(), 60) == 0

    assert (await tab.closed_with(timeout=20))[0] == code
