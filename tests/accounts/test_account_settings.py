"""The settings page: a user chooses whether their conversations may be used for training."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LABEL = "Allow my conversations to be used to train and improve models"


def checkbox(html: str) -> str:
    found = re.search(r'<input type="checkbox" name="allow_training"[^>]*>', html)
    assert found, "the training checkbox is not on the page"
    return found.group(0)


def test_the_page_needs_a_signed_in_user(client):
    response = client.get("/settings/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_setting_is_shown_on_by_default_with_a_link_to_the_tokens_page(signed_in):
    html = signed_in.get("/settings/").content.decode()
    assert LABEL in html
    assert "checked" in checkbox(html)
    assert 'href="/tokens/"' in html


def test_the_page_is_linked_from_the_navigation_and_the_tokens_page(signed_in):
    assert 'href="/settings/"' in signed_in.get("/").content.decode()
    assert 'href="/settings/"' in signed_in.get("/tokens/").content.decode()


def test_unticking_the_box_opts_out_and_says_so(signed_in, alice):
    response = signed_in.post("/settings/", {}, follow=True)
    assert response.redirect_chain == [("/settings/", 302)]
    html = response.content.decode()
    assert "your conversations will not be used for training" in html
    assert "checked" not in checkbox(html)
    alice.refresh_from_db()
    assert alice.allow_training is False


def test_ticking_it_again_opts_back_in(signed_in, alice):
    alice.allow_training = False
    alice.save()
    assert "checked" not in checkbox(signed_in.get("/settings/").content.decode())
    html = signed_in.post("/settings/", {"allow_training": "on"}, follow=True).content.decode()
    assert "your conversations may be used for training" in html
    alice.refresh_from_db()
    assert alice.allow_training is True


def test_one_users_choice_leaves_everyone_elses_alone(signed_in, alice, bob):
    signed_in.post("/settings/", {})
    bob.refresh_from_db()
    assert bob.allow_training is True


def test_a_post_without_the_csrf_token_is_refused(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/settings/", {}).status_code == 403
    alice.refresh_from_db()
    assert alice.allow_training is True
    # With the token from the page, the same post goes through.
    html = client.get("/settings/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    assert client.post("/settings/", {"csrfmiddlewaretoken": token}).status_code == 302
    alice.refresh_from_db()
    assert alice.allow_training is False
