"""Password guessing: after ten wrong passwords for an account, or a hundred from one address,
within fifteen minutes, sign-in answers 429 and says how long to wait, on Parley's login page
and on the admin's; tries sent at the same moment get no more passwords checked."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user
from django.contrib.auth.hashers import MD5PasswordHasher
from django.db import connections
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


def test_one_address_guessing_at_many_accounts_is_stopped_and_others_are_not(alice, bob, settings):
    settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS = 20
    guesser = Client(REMOTE_ADDR="203.0.113.7")
    for name in ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"]:
        fail(guesser, name, 2)
    fail(guesser, "judy", 2)

    response = log_in(guesser, "bob", "bob-pass-123")
    assert response.status_code == 429
    assert get_user(guesser).is_anonymous

    # Bob's own count is 2: from his own address he signs in.
    elsewhere = Client(REMOTE_ADDR="198.51.100.20")
    assert log_in(elsewhere, "bob", "bob-pass-123").status_code == 302
    assert get_user(elsewhere) == bob


def test_ten_wrong_passwords_from_a_shared_address_lock_no_one_else_out(alice, bob):
    """Behind a NAT, or a proxy that does not say who the client is, everyone has one address."""
    shared = "192.0.2.50"
    for name in ["alice", "carol", "dave", "erin", "frank"]:
        fail(Client(REMOTE_ADDR=shared), name, 2)

    office = Client(REMOTE_ADDR=shared)
    assert log_in(office, "bob", "bob-pass-123").status_code == 302
    assert get_user(office) == bob


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


# -- tries at the same moment ---------------------------------------------------------------------

TRIES_AT_ONCE = 8


class Gate:
    """Holds every password check until each of the tries sent at once has either reached its
    check or been answered without one: any try let through by a count that did not see the
    others gets checked, however the threads are scheduled."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.reset(0)

    def reset(self, tries: int) -> None:
        self.tries = tries
        self.settled = 0
        self.checked = 0

    def settle(self, checking: bool = False) -> None:
        with self.changed:
            self.settled += 1
            self.checked += checking
            self.changed.notify_all()

    def wait_for_all(self) -> None:
        with self.changed:
            # A bound on a hang, not a measure of speed.
            assert self.changed.wait_for(lambda: self.settled >= self.tries, timeout=60)


GATE = Gate()


class GatedHasher(MD5PasswordHasher):
    def verify(self, password: str, encoded: str) -> bool:
        GATE.settle(checking=True)
        GATE.wait_for_all()
        return super().verify(password, encoded)


@pytest.mark.django_db(transaction=True)
def test_tries_sent_at_once_get_no_more_passwords_checked_than_the_limit(alice, settings):
    GATE.reset(TRIES_AT_ONCE)
    settings.PASSWORD_HASHERS = [f"{__name__}.GatedHasher"]
    settings.PARLEY_LOGIN_FAILURES = 3
    start = threading.Barrier(TRIES_AT_ONCE)
    answers: list[int] = []

    def guess(n: int) -> None:
        checking = False
        try:
            start.wait()
            response = log_in(Client(REMOTE_ADDR=f"192.0.2.{n}"), "alice", WRONG)
            answers.append(response.status_code)
            checking = response.status_code == 200
        finally:
            if not checking:
                GATE.settle()
            connections.close_all()

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(TRIES_AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(answers) == TRIES_AT_ONCE
    assert GATE.checked <= 3
    assert answers.count(200) == GATE.checked
    assert answers.count(429) == TRIES_AT_ONCE - GATE.checked
