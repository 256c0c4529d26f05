"""CSRF on every write a browser's cookie can make: each route of the URLconf refuses a POST
without the token, each write of the matrix succeeds with it, and each write operation of the
API refuses a signed-in cookie without the X-CSRFToken header; a Bearer token needs none."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from tests.security.test_security_matrix import (
    ADMIN_MODELS,
    ADMIN_SITE,
    API,
    ASYNC_API,
    PAGES,
    Case,
    World,
    assert_outcome,
    build_world,
    fill,
    served_request,
)
from tests.support.apiclient import bearer

pytestmark = pytest.mark.django_db

REFUSED_PAGE = "This form was refused"


@pytest.fixture(autouse=True)
def fast_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(alice, bob, manager) -> World:
    """The matrix's world: alice's objects, one of each kind."""
    return build_world({"alice": alice, "bob": bob, "manager": manager})


WRITES = ("POST", "PATCH", "DELETE", "PUT")
# One route of each: a POST to any path of the route is refused before its view runs.
ROUTES = list({case.route: case for case in PAGES + ADMIN_SITE + ADMIN_MODELS}.values())


def browser(world: World, role: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users[role])  # type: ignore[arg-type]
    client.get("/tokens/")  # any page sets the CSRF cookie
    return client


def signed_in_as(case: Case) -> str:
    """Someone the matrix lets through, so the refusal is the token's and nothing else's."""
    return next(
        (role for role in ("alice", "manager") if case.expect[role] not in (403, 404)), "manager"
    )


@pytest.mark.parametrize("case", ROUTES, ids=lambda c: c.route or "/")
def test_a_post_without_the_token_is_refused_on_every_route(world, case):
    client = browser(world, "manager" if case.route.startswith("admin/") else "alice")
    path = "/" + fill(case.url or case.route, world)

    response = client.post(path, urlencode(case.data), "application/x-www-form-urlencoded")

    assert response.status_code == 403, path
    assert REFUSED_PAGE in response.content.decode(), path


PAGE_WRITES = [case for case in PAGES + ADMIN_SITE + ADMIN_MODELS if case.method in WRITES]


@pytest.mark.parametrize("case", PAGE_WRITES, ids=lambda c: f"{c.method} {c.route}")
def test_every_page_write_works_with_the_token(world, case, upstream):
    role = signed_in_as(case)
    client = browser(world, role)
    path = "/" + fill(case.url or case.route, world)
    data = {**case.data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value}

    response = client.post(path, urlencode(data), "application/x-www-form-urlencoded")

    assert_outcome(response, case.expect[role], path)


API_WRITES = [case for case in API if case.method in WRITES]


def api_write(client: Client, world: World, case: Case, **headers: str) -> Any:
    path = fill(case.route, world)
    body = fill(json.dumps(case.data), world)
    if case in ASYNC_API:
        # A run starts where the run engine runs: through the application, as serve runs it,
        # with this client's headers and cookies.
        cookies = "; ".join(f"{name}={kept.value}" for name, kept in client.cookies.items())
        given = {k[5:].replace("_", "-"): v for k, v in client.defaults.items() if k[:5] == "HTTP_"}
        sent = {
            **given,
            **({"Cookie": cookies} if cookies else {}),
            **{name.replace("_", "-"): value for name, value in headers.items()},
        }
        return served_request(sent, case.method, path, json.loads(body))
    return client.generic(case.method, path, body, "application/json", headers=headers)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", API_WRITES, ids=lambda c: f"{c.method} {c.route}")
def test_every_api_write_with_the_cookie_needs_the_token(world, case, upstream):
    role = signed_in_as(case)
    client = browser(world, role)

    refused = api_write(client, world, case)
    assert refused.status_code == 403
    assert json.loads(refused.content) == {
        "detail": "CSRF check failed: send the X-CSRFToken header."
    }

    allowed = api_write(client, world, case, X_CSRFToken=client.cookies["csrftoken"].value)
    assert_outcome(allowed, case.expect[role], case.route)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", API_WRITES, ids=lambda c: f"{c.method} {c.route}")
def test_every_api_write_with_a_bearer_token_needs_no_csrf_token(world, case, upstream):
    role = signed_in_as(case)
    client = Client(enforce_csrf_checks=True, headers=bearer(world.users[role]))

    assert_outcome(api_write(client, world, case), case.expect[role], case.route)
