"""What the account pages' tests share."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def signed_in(alice) -> Client:
    """Alice's browser, signed in."""
    client = Client()
    client.force_login(alice)
    return client
