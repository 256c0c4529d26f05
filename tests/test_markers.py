"""What tests/conftest.py does to every test: the markers `make test-fast` selects by, and the
quick password hashes of tests that run in this process."""

from __future__ import annotations

import pytest
from django.conf import global_settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher, check_password, make_password
from django.test import override_settings

from testkit.parley import ParleyProcess
from testkit.services import PrivatePostgres, PrivateRedis


@pytest.mark.parametrize(
    "start",
    [
        lambda: ParleyProcess({}).launch(),
        lambda: PrivatePostgres().start(),
        lambda: PrivateRedis().start(),
    ],
    ids=["parley", "postgres", "redis"],
)
def test_a_test_without_the_services_marker_cannot_start_a_server(start):
    with pytest.raises(pytest.fail.Exception, match=r"mark it @pytest\.mark\.services"):
        start()


@pytest.mark.services
def test_the_services_marker_lets_a_test_start_one():
    assert ParleyProcess.launch.__qualname__ == "ParleyProcess.launch"


def test_passwords_here_are_hashed_quickly_and_any_django_verifies_them():
    encoded = make_password("alice-pass-123")
    assert encoded.startswith("pbkdf2_sha256$1$")
    with override_settings(PASSWORD_HASHERS=global_settings.PASSWORD_HASHERS):
        assert check_password("alice-pass-123", encoded)
        assert not check_password("wrong", encoded)


@pytest.mark.services
def test_tests_with_server_processes_keep_djangos_hasher():
    """Their users sign in to another process, which would store a new hash at the first sign-in
    (and so end sessions made with the old one) if it met a weaker one."""
    assert make_password("x").startswith(f"pbkdf2_sha256${PBKDF2PasswordHasher.iterations}$")
