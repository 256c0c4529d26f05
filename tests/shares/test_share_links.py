"""Share links through the pages a person uses: made from a chat by its owner, a snapshot that
later messages do not reach until updated, revoked or expired at once, never indexed, naming
no one and hiding tools unless chosen, rendered and sanitized as the chat is."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit_app.models import Action, AuditEntry
from sessions_app.models import Message, Role, RunStatus, Session
from shares_app.models import ShareLink
from tests.support.apiclient import stored_run
from tests.support.roles import grant

pytestmark = pytest.mark.django_db


def signed_in(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def chat(alice, agent) -> Session:
    session = Session.objects.create(user=alice, agent=agent, session_name="Trip plans")
    stored_run(session, "Where to go?", "Try **Lisbon** <script>alert(1)</script>")
    return session


def make_link(client: Client, session: Session, **options) -> str:
    form = {"action": "create", "expires": "", **options}
    page = client.post(f"/s/{session.pk}/share", form)
    assert page.status_code == 200
    found = re.search(r'value="http://testserver(/share/[^"]+/)"', page.content.decode())
    assert found, "the page shows no link"
    return found.group(1)


def test_the_owner_makes_a_link_that_signed_in_people_read(alice, bob, chat):
    path = make_link(signed_in(alice), chat)
    token = path.split("/")[2]
    assert len(token) >= 43  # 32 random bytes, URL-safe: 256 bits
    link = ShareLink.objects.get()
    assert token not in str(link.__dict__) and link.token_hash != token  # only its hash is kept
    page = signed_in(bob).get(path)
    assert page.status_code == 200
    body = page.content.decode()
    assert "Trip plans" in body and "Where to go?" in body
    assert "<strong>Lisbon</strong>" in body
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;" in body
    assert page["X-Robots-Tag"] == "noindex, nofollow, noarchive"
    assert '<meta name="robots" content="noindex, nofollow, noarchive">' in body
    assert page["Referrer-Policy"] == "no-referrer"
    assert "no-store" in page["Cache-Control"]
    assert "alice" not in body  # no owner name unless chosen


def test_anyone_with_the_link_only_when_the_setting_says_so(alice, chat, settings):
    path = make_link(signed_in(alice), chat)
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    settings.PARLEY_PUBLIC_SHARE_LINKS = True
    assert "Where to go?" in Client().get(path).content.decode()


def test_later_messages_stay_private_until_the_link_is_updated(alice, bob, chat):
    owner = signed_in(alice)
    path = make_link(owner, chat)
    stored_run(chat, "And in winter?", "Madeira.")
    assert "Madeira" not in signed_in(bob).get(path).content.decode()
    owner.post(f"/s/{chat.pk}/share", {"action": "update"})
    assert "Madeira" in signed_in(bob).get(path).content.decode()


def test_an_answer_still_streaming_is_left_out(alice, bob, chat):
    stored_run(chat, "One more", "half an ans", status=RunStatus.RUNNING)
    path = make_link(signed_in(alice), chat)
    body = signed_in(bob).get(path).content.decode()
    assert "One more" not in body and "half an ans" not in body


def test_revoked_opens_nothing_at_once_and_a_new_link_replaces_the_old(alice, bob, chat):
    owner, reader = signed_in(alice), signed_in(bob)
    first = make_link(owner, chat)
    second = make_link(owner, chat, action="replace")
    assert reader.get(first).status_code == 404
    assert reader.get(second).status_code == 200
    owner.post(f"/s/{chat.pk}/share", {"action": "revoke"})
    gone = reader.get(second)
    assert gone.status_code == 404 and "This link opens nothing" in gone.content.decode()
    assert gone["X-Robots-Tag"] == "noindex, nofollow, noarchive"


def test_an_expired_link_opens_nothing(alice, bob, chat):
    path = make_link(signed_in(alice), chat, expires="1")
    link = ShareLink.objects.get()
    assert timedelta(hours=23) < link.expires_at - timezone.now() <= timedelta(days=1)
    ShareLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert signed_in(bob).get(path).status_code == 404


def test_the_owners_name_and_tools_only_when_chosen(alice, bob, chat):
    run = stored_run(chat, "Weather?", "Sunny.")
    Message.objects.filter(run=run, order=1).update(order=3)
    call = {"id": "c1", "type": "function", "function": {"name": "forecast", "arguments": "{}"}}
    Message.objects.create(run=run, session=chat, order=1, role=Role.ASSISTANT, tool_calls=[call])
    Message.objects.create(
        run=run, session=chat, order=2, role=Role.TOOL, tool_call_id="c1", content="RESULT-22C"
    )
    owner, reader = signed_in(alice), signed_in(bob)
    hidden = reader.get(make_link(owner, chat)).content.decode()
    assert "forecast" not in hidden and "RESULT-22C" not in hidden and "alice" not in hidden
    assert "RESULT-22C" not in str(ShareLink.objects.get(revoked_at=None).snapshot)
    shown = reader.get(
        make_link(owner, chat, action="replace", show_owner="on", show_tools="on")
    ).content.decode()
    assert "forecast" in shown and "RESULT-22C" in shown
    assert 'data-testid="shared-owner">alice<' in shown


def test_only_the_owner_shares_a_chat(alice, bob, staff, chat):
    assert signed_in(bob).get(f"/s/{chat.pk}/share").status_code == 404
    assert signed_in(bob).post(f"/s/{chat.pk}/share", {"action": "create"}).status_code == 404
    grant(staff, "view_session")
    assert signed_in(staff).post(f"/s/{chat.pk}/share", {"action": "create"}).status_code == 403
    assert not ShareLink.objects.exists()


def test_making_a_link_needs_the_csrf_token(alice, chat):
    client = signed_in(alice, enforce_csrf_checks=True)
    assert client.post(f"/s/{chat.pk}/share", {"action": "create"}).status_code == 403
    assert not ShareLink.objects.exists()


def test_the_settings_page_lists_the_owners_links_to_update_or_revoke(alice, bob, chat):
    owner = signed_in(alice)
    path = make_link(owner, chat)
    page = owner.get("/settings/").content.decode()
    assert page.count('data-testid="share-link-row"') == 1 and "Trip plans" in page
    assert 'data-testid="share-link-row"' not in signed_in(bob).get("/settings/").content.decode()
    link = ShareLink.objects.get()
    assert signed_in(bob).post(f"/share-links/{link.pk}/revoke").status_code == 404
    owner.post(f"/share-links/{link.pk}/revoke")
    assert signed_in(bob).get(path).status_code == 404
    assert "<strong>revoked</strong>" in owner.get("/settings/").content.decode()


def test_staff_revoke_any_link_and_it_is_audited(root, superuser, alice, bob, chat):
    path = make_link(signed_in(alice), chat)
    link = ShareLink.objects.get()
    form = {"action": "revoke", "_selected_action": [str(link.pk)]}
    assert root.post("/admin/shares_app/sharelink/", form).status_code == 302
    assert signed_in(bob).get(path).status_code == 404
    entry = AuditEntry.objects.get(action=Action.SHARE_REVOKED)
    assert (entry.actor_id, entry.subject_id) == (superuser.pk, alice.pk)


def test_the_chat_header_offers_share_to_the_owner_only(alice, staff, chat):
    assert 'data-testid="session-share"' in signed_in(alice).get(f"/s/{chat.pk}/").content.decode()
    grant(staff, "view_session")
    assert (
        'data-testid="session-share"' not in signed_in(staff).get(f"/s/{chat.pk}/").content.decode()
    )


def test_deleting_the_chat_takes_its_links(alice, bob, chat):
    path = make_link(signed_in(alice), chat)
    chat.delete()
    assert signed_in(bob).get(path).status_code == 404
    assert not ShareLink.objects.exists()
