"""Password guessing, on Parley's login page and on the admin's. Ten wrong passwords for one account
from one address within fifteen minutes, or a hundred from one address for any accounts, stop
that address's tries with a 429 saying how long to wait. An account guessed at from many
addresses only slows down the addresses that failed for it: its owner signs in from anywhere
else. Tries sent at the same moment get no more passwords checked than the limits allow."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

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
ACCOUNT_FROM_ADDRESS = "Too many failed sign-ins for this account from this address."
FROM_ADDRESS = "Too many failed sign-ins from this address."
SLOWED = "Many wrong passwords have been sent for this account; sign-ins from here are slowed."
BOTH_PAGES = pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])


@pytest.fixture(autouse=True)
def fast_hashing(settings) -> None:
    """Every try checks a password; the default hasher would make each test take seconds."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-pass-123")


class Clock:
    """Django's clock, stopped, and moved on only by the test: a wait of N seconds is N."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    stopped = Clock()
    monkeypatch.setattr(timezone, "now", stopped)
    return stopped


def at(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def log_in(client: Client, username: str, password: str, path: str = "/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def fail(client: Client, username: str, times: int, path: str = "/accounts/login/") -> None:
    for _ in range(times):
        response = log_in(client, username, WRONG, path)
        assert response.status_code == 200
        assert REFUSED in response.content.decode()


def signed_in(client: Client, username: str, password: str, path: str = "/accounts/login/"):
    response = log_in(client, username, password, path)
    return response.status_code == 302 and get_user(client).get_username() == username


def test_the_eleventh_try_from_the_same_address_is_refused_with_429(client, alice):
    fail(client, "alice", 10)

    response = log_in(client, "alice", "alice-pass-123")  # the right one: not even checked

    assert response.status_code == 429
    page = response.content.decode()
    assert ACCOUNT_FROM_ADDRESS in page and "Try again in 15 minutes." in page
    assert 14 * 60 < int(response["Retry-After"]) <= 15 * 60
    assert get_user(client).is_anonymous


@BOTH_PAGES
def test_ten_wrong_passwords_for_admin_do_not_keep_admin_out_from_elsewhere(admin, path):
    fail(at("203.0.113.7"), "admin", 10, path)

    assert signed_in(at("198.51.100.20"), "admin", "admin-pass-123", path)

    # The address that sent them is refused, the right password too, for the window.
    guesser = at("203.0.113.7")
    response = log_in(guesser, "admin", "admin-pass-123", path)
    assert ACCOUNT_FROM_ADDRESS in response.content.decode()
    assert get_user(guesser).is_anonymous


def test_once_the_window_has_passed_the_right_password_works_again(client, alice):
    fail(client, "alice", 10)
    LoginFailure.objects.update(created_at=timezone.now() - timedelta(minutes=15, seconds=1))

    response = log_in(client, "alice", "alice-pass-123")

    assert response.status_code == 302
    assert get_user(client) == alice


def test_a_hundred_failures_from_one_address_lock_out_that_address_only(bob, django_user_model):
    names = ["alice"] + [f"user{n}" for n in range(9)]
    for name in names:
        django_user_model.objects.create_user(name, password=f"{name}-pass-123")
    guesser = at("203.0.113.7")
    for name in names:
        fail(guesser, name, 10)

    # From anywhere else, the accounts guessed at sign in as if nothing had happened...
    assert signed_in(at("198.51.100.20"), "alice", "alice-pass-123")
    assert signed_in(at("198.51.100.21"), "user3", "user3-pass-123")
    assert signed_in(at("198.51.100.22"), "bob", "bob-pass-123")

    # ...and from there, not even an account nobody guessed at gets a password checked.
    response = log_in(guesser, "bob", "bob-pass-123")
    assert response.status_code == 429
    assert FROM_ADDRESS in response.content.decode()
    assert get_user(guesser).is_anonymous


def test_one_address_guessing_at_many_accounts_is_stopped_and_others_are_not(alice, bob, settings):
    settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS = 20
    guesser = at("203.0.113.7")
    for name in ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"]:
        fail(guesser, name, 2)
    fail(guesser, "judy", 2)

    response = log_in(guesser, "bob", "bob-pass-123")
    assert response.status_code == 429
    assert get_user(guesser).is_anonymous

    assert signed_in(at("198.51.100.20"), "bob", "bob-pass-123")


def test_an_ipv6_client_counts_as_its_64_block(alice, bob, settings):
    """One connection usually gets a /64 whole: counting each of its addresses apart would give
    a guesser billions of fresh ones."""
    settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS = 20
    for n in range(20):
        fail(at(f"2001:db8:1:2::{n + 1:x}"), "alice" if n % 2 else "carol", 1)

    response = log_in(at("2001:db8:1:2:abcd::99"), "bob", "bob-pass-123")
    assert response.status_code == 429
    assert FROM_ADDRESS in response.content.decode()

    assert signed_in(at("2001:db8:1:3::1"), "bob", "bob-pass-123")


# -- many people behind one address ---------------------------------------------------------------


def test_ten_wrong_passwords_from_a_shared_address_lock_no_one_else_out(alice, bob):
    """Behind a NAT, or a proxy that does not say who the client is, everyone has one address."""
    shared = "192.0.2.50"
    for name in ["alice", "carol", "dave", "erin", "frank"]:
        fail(at(shared), name, 2)

    assert signed_in(at(shared), "bob", "bob-pass-123")


def test_an_account_guessed_at_from_a_shared_address_is_refused_there_only(alice, bob):
    """The price of a proxy that hides its clients' addresses (README: --proxy-headers): the
    owner of an account guessed at from it waits out the window there, or signs in elsewhere."""
    shared = "192.0.2.50"
    fail(at(shared), "alice", 10)

    assert log_in(at(shared), "alice", "alice-pass-123").status_code == 429
    assert signed_in(at(shared), "bob", "bob-pass-123")
    assert signed_in(at("198.51.100.20"), "alice", "alice-pass-123")


# -- one account guessed at from many addresses ---------------------------------------------------


def test_the_account_wide_slowdown_grows_with_failures_up_to_its_cap(admin, clock, settings):
    settings.PARLEY_LOGIN_DELAY_MAX = 10
    fail(at("203.0.113.1"), "admin", 10)

    waits = []
    for n in range(2, 7):
        guesser = at(f"203.0.113.{n}")
        fail(guesser, "admin", 1)  # a first try from a new address is checked at once
        response = log_in(guesser, "admin", "admin-pass-123")  # the next one waits
        assert response.status_code == 429
        assert SLOWED in response.content.decode()
        assert get_user(guesser).is_anonymous
        waits.append(int(response["Retry-After"]))

    assert waits == [2, 4, 8, 10, 10]


def test_an_owner_who_mistyped_during_an_attack_waits_a_few_seconds_then_signs_in(admin, clock):
    for n in range(10):
        fail(at(f"203.0.113.{n}"), "admin", 1)
    owner = at("198.51.100.20")
    fail(owner, "admin", 1)

    response = log_in(owner, "admin", "admin-pass-123")
    assert response.status_code == 429
    assert "Try again in 2 seconds." in response.content.decode()
    assert response["Retry-After"] == "2"

    clock.advance(2)
    assert signed_in(owner, "admin", "admin-pass-123")


def test_failures_under_the_accounts_threshold_slow_no_one(alice, clock):
    for n in range(8):
        fail(at(f"203.0.113.{n}"), "alice", 1)

    fail(at("203.0.113.0"), "alice", 1)  # the ninth, from an address that failed already
    assert signed_in(at("203.0.113.1"), "alice", "alice-pass-123")


# -- what is counted -------------------------------------------------------------------------------


def test_the_count_for_an_account_holds_in_any_case(client, alice):
    for name in ["alice", "Alice", "ALICE ", "aLiCe", "alice"]:
        fail(client, name, 2)

    response = log_in(client, "alice", "alice-pass-123")

    assert response.status_code == 429
    assert ACCOUNT_FROM_ADDRESS in response.content.decode()


def test_a_right_password_clears_its_own_addresss_count(alice):
    fail(at("192.0.2.1"), "alice", 9)
    assert signed_in(at("192.0.2.1"), "alice", "alice-pass-123")

    fail(at("192.0.2.1"), "alice", 9)
    assert signed_in(at("192.0.2.1"), "alice", "alice-pass-123")


def test_a_right_password_leaves_other_addresses_counts(alice):
    fail(at("203.0.113.7"), "alice", 10)
    assert signed_in(at("192.0.2.1"), "alice", "alice-pass-123")

    assert log_in(at("203.0.113.7"), "alice", "alice-pass-123").status_code == 429


def test_the_admin_login_is_throttled_too(client, staff):
    fail(client, "staff", 10, path="/admin/login/")

    response = log_in(client, "staff", "staff-pass-123", path="/admin/login/")

    assert ACCOUNT_FROM_ADDRESS in response.content.decode()
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
@pytest.mark.parametrize(
    "limit, usernames",
    [
        ("PARLEY_LOGIN_FAILURES", ["alice"] * TRIES_AT_ONCE),
        ("PARLEY_LOGIN_FAILURES_PER_ADDRESS", [f"user{n}" for n in range(TRIES_AT_ONCE)]),
    ],
    ids=["one-account", "many-accounts"],
)
def test_tries_sent_at_once_get_no_more_passwords_checked_than_the_limit(
    limit, usernames, django_user_model, settings
):
    for name in set(usernames):
        django_user_model.objects.create_user(name, password=f"{name}-pass-123")
    GATE.reset(TRIES_AT_ONCE)
    settings.PASSWORD_HASHERS = [f"{__name__}.GatedHasher"]
    setattr(settings, limit, 3)
    start = threading.Barrier(TRIES_AT_ONCE)
    answers: list[int] = []

    def guess(username: str) -> None:
        checking = False
        try:
            start.wait()
            response = log_in(at("192.0.2.1"), username, WRONG)
            answers.append(response.status_code)
            checking = response.status_code == 200
        finally:
            if not checking:
                GATE.settle()
            connections.close_all()

    threads = [threading.Thread(target=guess, args=(name,)) for name in usernames]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(answers) == TRIES_AT_ONCE
    assert GATE.checked <= 3
    assert answers.count(200) == GATE.checked
    assert answers.count(429) == TRIES_AT_ONCE - GATE.checked
