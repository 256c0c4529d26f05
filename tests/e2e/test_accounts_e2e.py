"""Accounts in a real browser against the real server."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from sessions_app.models import User

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_person_signs_up_through_the_form_and_lands_on_the_chat(page: Page, live_server_url: str):
    page.goto("/accounts/login/")
    page.get_by_role("link", name="Create an account").click()
    expect(page).to_have_url(f"{live_server_url}/accounts/signup/")

    page.get_by_label("Username").fill("carol")
    page.get_by_label("Password", exact=True).fill("correct-horse-battery")
    page.get_by_label("Password confirmation").fill("correct-horse-battery")
    page.get_by_role("button", name="Sign up").click()

    expect(page).to_have_url(f"{live_server_url}/")
    expect(page.locator(".topnav .who")).to_have_text("carol")
    assert User.objects.get(username="carol").check_password("correct-horse-battery")


def test_a_person_who_mistypes_the_password_stays_on_the_login_page_and_sees_why(
    page: Page, live_server_url: str, alice: User
):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-her-password")
    page.get_by_role("button", name="Log in").click()

    expect(page.get_by_role("alert")).to_contain_text("Please enter a correct username")
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))


def test_after_logging_out_the_chat_sends_the_person_to_the_login_page(
    page: Page, live_server_url: str, login: Callable[[Page, str, str], None], alice: User
):
    login(page, "alice", "alice-pass-123")
    expect(page).to_have_url(f"{live_server_url}/")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{live_server_url}/accounts/login/")

    page.goto("/")
    expect(page).to_have_url(f"{live_server_url}/accounts/login/?next=/")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
