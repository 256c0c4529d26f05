"""Staff inspect every session, run and model call in the Django admin."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client

from sessions_app.admin import SessionAdmin
from sessions_app.models import Agent, Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-pass-123")


@pytest.fixture
def sessions(alice) -> list[Session]:
    agent = Agent.objects.create(name="Helper", model="scripted")
    return Session.objects.bulk_create(
        [Session(user=alice, agent=agent, session_name=f"chat {i}") for i in range(3)]
    )


def test_staff_list_every_users_sessions(superuser, sessions):
    client = Client()
    client.force_login(superuser)
    page = client.get("/admin/sessions_app/session/").content.decode()
    for session in sessions:
        assert session.session_name in page
        assert f'value="{session.session_id}" class="action-select"' in page


def test_the_row_checkbox_is_exactly_djangos(superuser, sessions):
    ours = SessionAdmin(Session, admin.site)
    stock = admin.ModelAdmin(Session, admin.site)
    assert ours.action_checkbox(sessions[0]) == stock.action_checkbox(sessions[0])


def test_selected_sessions_can_be_deleted_from_the_list(superuser, sessions):
    client = Client()
    client.force_login(superuser)
    picked = [str(s.session_id) for s in sessions[:2]]
    form = {"action": "delete_selected", "_selected_action": picked}
    confirm = client.post("/admin/sessions_app/session/", form)
    assert "Are you sure" in confirm.content.decode()
    done = client.post("/admin/sessions_app/session/", {**form, "post": "yes"})
    assert done.status_code == 302
    assert list(Session.objects.values_list("session_name", flat=True)) == ["chat 2"]


def test_the_admin_is_closed_to_users_who_are_not_staff(alice, sessions):
    client = Client()
    client.force_login(alice)
    response = client.get("/admin/sessions_app/session/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
