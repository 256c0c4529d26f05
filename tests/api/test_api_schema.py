"""The whole OpenAPI document, tested property-based by schemathesis against the real ASGI app.

Every operation gets generated requests (as a signed-in staff user, with the scripted model behind
POST /api/runs); no answer may be a 500 or break the schema the API publishes. Ids in paths are
half the time real objects, so the 2xx answers are checked too, not only the 404s.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.serializers.json import DjangoJSONEncoder
from hypothesis import HealthCheck, settings
from schemathesis.python import asgi as schemathesis_asgi

from datasets_app.models import Dataset
from datasets_app.services.collect import add_run
from project.api import api
from project.asgi import application
from sessions_app.models import Agent, RunStatus, Session
from tests.support.apiclient import bearer, default_agent, stored_run

pytestmark = pytest.mark.django_db(transaction=True)


class RealIds:
    """Fresh objects for path ids: a DELETE or a cancel must not starve later examples."""

    def __init__(self, user: Any, agent: Agent) -> None:
        self.user = user
        self.agent = agent

    def session_id(self) -> str:
        session = Session.objects.create(user=self.user, agent=self.agent, session_name="real")
        stored_run(session, "question", "answer")
        return str(session.session_id)

    def run_id(self) -> str:
        session = Session.objects.create(user=self.user, agent=self.agent)
        status = RunStatus.COMPLETED
        return str(stored_run(session, "question", "answer", status=status).run_id)

    def agent_id(self) -> str:
        return str(self.agent.agent_id)

    def version_id(self) -> str:
        return str(self.agent.live_version_id)

    def dataset_id(self) -> str:
        self.dataset = self._dataset()
        return str(self.dataset.dataset_id)

    @staticmethod
    def _dataset() -> Dataset:
        return Dataset.objects.create(name=f"real-{uuid.uuid4().hex[:12]}")

    def item_id(self) -> str:
        # An item of the dataset substituted just before, when there was one.
        dataset = getattr(self, "dataset", None) or self._dataset()
        session = Session.objects.create(user=self.user, agent=self.agent)
        item = add_run(dataset, stored_run(session, "question", "answer"))[0]
        return str(item.item_id)

    def substitute(self, case: Any) -> None:
        for name, value in (case.path_parameters or {}).items():
            # Decided by the generated value itself, so a replayed example is the same request.
            if hasattr(self, name) and isinstance(value, str) and _even(value):
                case.path_parameters[name] = getattr(self, name)()


def _even(value: str) -> bool:
    try:
        return uuid.UUID(value).int % 2 == 0
    except ValueError:
        return False


@pytest.fixture
def real_ids(staff, upstream, settings) -> RealIds:
    # Generated runs and sessions would hit the limits: 429 is tested apart.
    settings.PARLEY_RUNS_PER_MINUTE = settings.PARLEY_SESSIONS_PER_MINUTE = 0
    settings.LLM_READ_TIMEOUT = 5.0
    return RealIds(staff, default_agent())


@pytest.fixture(scope="module", autouse=True)
def _asgi_loop_stops_with_the_module() -> Iterator[None]:
    """schemathesis serves every ASGI request on one event loop kept until the process exits.

    Runs started through POST /api/runs leave this process's tasks on that loop: with Redis the
    realtime pump, which would otherwise be destroyed pending at exit. (The run engine runs
    there between the ASGI lifespan's startup and shutdown, which schemathesis sends around
    each test; see project.asgi.) The loop is stopped with this module, by the function
    schemathesis itself registers to run at exit; the shared loop and that function came in
    schemathesis 4.26, the lower bound in pyproject.toml.
    """
    yield
    schemathesis_asgi._shutdown()


@pytest.fixture
def auth_headers(staff) -> dict[str, str]:
    return bearer(staff, "schemathesis")


def _served_document() -> dict[str, Any]:
    """The document as /api/openapi.json serves it (JSON), built without a request: asking the
    app for it would send an ASGI lifespan startup, which starts the run engine and its pollers
    at collection, before any test database exists."""
    return json.loads(json.dumps(api.get_openapi_schema(), cls=DjangoJSONEncoder))


# Loaded at collection; requests then go to the app itself, as from_asgi would send them.
# (schemathesis.pytest.from_fixture would load it per test, but is not compatible with pytest 9.)
schema = schemathesis.openapi.from_dict(_served_document())
schema.app, schema.location = application, "/api/openapi.json"


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_the_api_answers_every_generated_request_within_its_own_schema(
    case, real_ids, auth_headers
):
    real_ids.substitute(case)
    case.call_and_validate(headers=auth_headers)


def test_the_document_and_its_docs_page_are_public_and_cover_the_contract(client):
    document = client.get("/api/openapi.json").json()
    assert set(document["paths"]) >= {
        "/api/agents",
        "/api/agents/{agent_id}",
        "/api/sessions",
        "/api/sessions/{session_id}",
        "/api/sessions/{session_id}/runs",
        "/api/sessions/{session_id}/messages",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/cancel",
        "/api/runs/{run_id}/feedback",
        "/api/metrics",
        "/api/datasets",
        "/api/datasets/{dataset_id}",
        "/api/datasets/{dataset_id}/items",
        "/api/datasets/{dataset_id}/export",
    }
    assert set(document["components"]["securitySchemes"]) == {"BearerToken", "SessionCookie"}
    stream = document["paths"]["/api/runs"]["post"]["responses"]["200"]["content"]
    assert set(stream) == {"application/json", "text/event-stream"}
    assert client.get("/api/docs").status_code == 200
