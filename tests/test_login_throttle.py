"""Password guessing: after ten wrong passwords for an account, or from one address, within
fifteen minutes, sign-in answers 429 and says how long to wait, on Parley's login page and on
the admin's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user
from django.test import Client
from django.utils import timezone

from sessions_app.models import LoginFailure

pytestmark = pytest.mark.django_db

WRONG = "not-the-password"
REFUSED = "correct username and password"
THROTTLED = "Too many failed sign-ins for this account or from this address."


@pytest.fixture(autouse=True)
def fast_hashing(settings) -> None:
    """Every try checks a password; the default hasher would make each test take seconds."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def log_in(client: Client, username: str, password: str, path: str = "/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def fail(client: Client, username: str, times: int, path: str = "/accounts/login/") -> None:
    for _ in range(times):
        response = log_in(client, username, WRONG, path)
        assert response.status_code == 200
        assert REFUSED in response.content.decode()


def test_the_eleventh_try_after_ten_wrong_passwords_is_refused_with_429(client, alice):
    fail(client, "alice", 10)

    response = log_in(client, "alice", "alice-pass-123")  # the right one: not even checked

    assert response.status_code == 429
    page = response.content.decode()
    assert THROTTLED in page and "Try again in 15 minutes." in page
    assert 14 * 60 < int(response["Retry-After"]) <= 15 * 60
    assert get_user(client).is_anonymous


def test_once_the_window_has_passed_the_right_password_works_again(client, alice):
    fail(client, "alice", 10)
    LoginFailure.objects.update(created_at=timezone.now() - timedelta(minutes=15, seconds=1))

    response = log_in(client, "alice", "alice-pass-123")

    assert response.status_code == 302
    assert get_user(client) == alice


def test_one_address_guessing_at_many_accounts_is_stopped_and_others_are_not(alice, bob):
    guesser = Client(REMOTE_ADDR="203.0.113.7")
    for name in ["alice", "bob", "carol", "dave", "erin"]:
        fail(guesser, name, 2)

    response = log_in(guesser, "bob", "bob-pass-123")
    assert response.status_code == 429
    assert get_user(guesser).is_anonymous

    # Bob's own count is 2: from his own address he signs in.
    elsewhere = Client(REMOTE_ADDR="198.51.100.20")
    assert log_in(elsewhere, "bob", "bob-pass-123").status_code == 302
    assert get_user(elsewhere) == bob


def test_the_account_count_holds_from_any_address_and_in_any_case(alice):
    for i, name in enumerate(["alice", "Alice", "ALICE ", "aLiCe", "alice"]):
        fail(Client(REMOTE_ADDR=f"192.0.2.{i}"), name, 2)

    response = log_in(Client(REMOTE_ADDR="192.0.2.99"), "alice", "alice-pass-123")

    assert response.status_code == 429
    assert THROTTLED in response.content.decode()


def test_a_right_password_clears_the_accounts_count(alice):
    fail(Client(REMOTE_ADDR="192.0.2.1"), "alice", 9)
    assert log_in(Client(REMOTE_ADDR="192.0.2.1"), "alice", "alice-pass-123").status_code == 302

    other = Client(REMOTE_ADDR="192.0.2.2")
    fail(other, "alice", 9)
    assert log_in(other, "alice", "alice-pass-123").status_code == 302


def test_the_admin_login_is_throttled_too(client, staff):
    fail(client, "staff", 10, path="/admin/login/")

    response = log_in(client, "staff", "staff-pass-123", path="/admin/login/")

    assert THROTTLED in response.content.decode()
    assert get_user(client).is_anonymous
    assert client.get("/admin/").status_code == 302


def test_failures_at_either_login_count_together(client, staff):
    fail(client, "staff", 5, path="/admin/login/")
    fail(client, "staff", 5)

    assert log_in(client, "staff", "staff-pass-123").status_code == 429


def test_no_password_is_kept_for_a_failed_sign_in(client, alice):
    fail(client, "alice", 1)

    assert list(LoginFailure.objects.values_list("username", "address")) == [("alice", "127.0.0.1")]
    assert WRONG not in str(list(LoginFailure.objects.values()))


def test_the_throttle_can_be_turned_off(client, alice, settings):
    settings.PARLEY_LOGIN_FAILURES = 0
    fail(client, "alice", 12)

    assert log_in(client, "alice", "alice-pass-123").status_code == 302
