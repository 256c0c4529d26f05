"""Signing up, logging in and out through the pages a person uses."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user
from django.http import HttpResponse
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from sessions_app.models import User

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery"


def signup(
    client: Client, username: str = "carol", password: str = PASSWORD, again: str | None = None
) -> HttpResponse:
    return client.post(
        "/accounts/signup/",
        {"username": username, "password1": password, "password2": again or password},
    )


def test_signup_creates_the_user_logs_them_in_and_sends_them_to_the_chat(client):
    response = signup(client)

    assert response.status_code == 302 and response["Location"] == "/"
    user = User.objects.get(username="carol")
    assert user.check_password(PASSWORD) and not user.is_staff
    assert get_user(client) == user


def test_signup_refuses_a_taken_username_in_any_case_and_creates_nothing(client, alice):
    response = signup(client, username="Alice")

    assertContains(response, "A user with that username already exists.")
    assert list(User.objects.values_list("username", flat=True)) == ["alice"]
    assert get_user(client).is_anonymous


def test_signup_refuses_mismatched_passwords_and_creates_nothing(client):
    response = signup(client, again="correct-horse-staple")

    assertContains(response, "The two password fields didn\u2019t match.")
    assert not User.objects.exists()
    assert get_user(client).is_anonymous


def test_signup_refuses_a_weak_password(client):
    response = signup(client, password="12345678")

    assertContains(response, "This password is too common.")
    assert not User.objects.exists()


def test_a_logged_in_person_opening_signup_goes_to_the_chat(client, alice):
    client.force_login(alice)

    response = client.get("/accounts/signup/")

    assert response.status_code == 302 and response["Location"] == "/"


def test_the_login_page_links_to_signup_and_back(client):
    login_page = client.get("/accounts/login/")
    assertContains(login_page, 'href="/accounts/signup/"')
    assertContains(client.get("/accounts/signup/"), 'href="/accounts/login/"')


def test_with_signup_turned_off_the_page_is_missing_and_not_linked(client, settings):
    settings.PARLEY_SIGNUP_ENABLED = False

    assert client.get("/accounts/signup/").status_code == 404
    assert signup(client).status_code == 404
    assert not User.objects.exists()
    login_page = client.get("/accounts/login/")
    assert login_page.status_code == 200
    assertNotContains(login_page, "/accounts/signup/")


def test_login_sends_the_person_to_the_chat(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})

    assert response.status_code == 302 and response["Location"] == "/"
    assert get_user(client) == alice


def test_login_with_a_wrong_password_shows_an_error_and_stays_logged_out(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})

    assertContains(response, "Please enter a correct username and password.")
    assert get_user(client).is_anonymous


def test_logout_by_post_ends_the_session_and_returns_to_login(client, alice):
    client.force_login(alice)

    response = client.post("/accounts/logout/")

    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert get_user(client).is_anonymous
    assert client.get("/")["Location"] == "/accounts/login/?next=/"


def test_the_chat_requires_login(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"
