"""Who may do what: every page, API operation and chat socket action, for anonymous, alice (who
owns every object here), bob (another user), support (a staff member of the group "Support",
which may view everything of Parley's apps and change nothing), manager (a staff member with
every permission of Parley's apps, no superuser) and a superuser.

Another user's object answers 404 and never its data, as a missing one; staff reach it as far as
their Django permissions go, the same on every door: without the right, 403 (API: a `detail`
naming it; the socket: a notice naming it). Anonymous gets 401 (API), the login page (pages) or
a closed socket. The routes come from the URLconf, the operations from the published OpenAPI
document and the actions from the consumer: one added without a line here fails
`test_every_route_is_in_the_matrix`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.http import HttpResponse
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from audit_app.models import Action, AuditEntry
from audit_app.record import record
from budgets_app.models import Budget
from datasets_app.models import Dataset, DatasetItem
from datasets_app.services import catalog
from evals_app.models import EvalRule, Experiment, ExperimentStatus, Trial, TrialStatus
from project.api import api
from sessions_app.accounts import create_token
from sessions_app.models import Agent, AgentVersion, ApiToken, LLMCall, Message, Run, Session, User
from sessions_app.models.agents import config_of
from sessions_app.web.consumer import ChatConsumer
from shares_app import links
from shares_app.models import ShareLink
from tests.support.apiclient import bearer, default_agent, stored_run
from tests.support.asgiclient import request_served
from tests.support.chattab import open_tab
from tests.support.roles import support_group
from tests.support.waiting import until

pytestmark = pytest.mark.django_db

SECRETS = ("alice-private-title-7731", "alice-private-question-5519", "alice-private-answer-2240")
ROLES = ("anonymous", "alice", "bob", "support", "manager", "superuser")
# Who may read alice's conversation: herself, and staff who may view sessions.
READERS = ("alice", "support", "manager", "superuser")
LOGIN = "login"  # a redirect to /accounts/login/?next=…
ADMIN_LOGIN = "admin-login"  # a redirect to /admin/login/?next=…


def to(location: str) -> str:
    """A redirect to exactly this location (placeholders as in `fill`)."""
    return "→" + location


@pytest.fixture(autouse=True)
def fast_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class World:
    """Alice's objects, one of each kind, and the users."""

    users: dict[str, User | None]
    agent: Agent
    session: Session
    run: Run
    message: Message
    call: LLMCall
    token: ApiToken
    dataset: Dataset
    item: DatasetItem
    group: Group
    rule: EvalRule
    experiment: Experiment
    trial: Trial  # the candidate's answer in the experiment
    budget: Budget  # alice's own
    audit_entry: AuditEntry
    share_link: ShareLink  # to alice's session
    share_token: str

    def placeholders(self) -> dict[str, str]:
        return {
            "<session_id:session_id>": str(self.session.pk),
            "<uuid:run_id>": str(self.run.pk),
            "<int:token_id>": str(self.token.pk),
            "<uuid:dataset_id>": str(self.dataset.pk),
            "<uuid:agent_id>": str(self.agent.pk),
            "<uuid:version_id>": str(self.agent.live_version_id),
            "{session_id}": str(self.session.pk),
            "{run_id}": str(self.run.pk),
            "{agent_id}": str(self.agent.pk),
            "{version_id}": str(self.agent.live_version_id),
            "{dataset_id}": str(self.dataset.pk),
            "{item_id}": str(self.item.pk),
            "{experiment_id}": str(self.experiment.pk),
            "<uuid:experiment_id>": str(self.experiment.pk),
            "<uuid:trial_id>": str(self.trial.pk),
            "<uuid:link_id>": str(self.share_link.pk),
            "<str:token>": self.share_token,
        }

    def admin_object(self, model: str) -> str:
        objects = {
            "group": self.group,
            "agent": self.agent,
            "apitoken": self.token,
            "llmcall": self.call,
            "dataset": self.dataset,
            "datasetitem": self.item,
            "evalrule": self.rule,
            "run": self.run,
            "message": self.message,
            "session": self.session,
            "user": self.users["alice"],
            "experiment": self.experiment,
            "budget": self.budget,
            "auditentry": self.audit_entry,
            "sharelink": self.share_link,
        }
        return str(objects[model].pk)  # type: ignore[union-attr]


@pytest.fixture
def world(alice, bob, support, manager, superuser) -> World:
    users = {"alice": alice, "bob": bob, "support": support, "manager": manager}
    return build_world({**users, "superuser": superuser})


def build_world(users: dict[str, User]) -> World:
    """Alice's objects; `users` names alice, bob, manager and whoever else a test signs in as."""
    alice = users["alice"]
    agent = default_agent()
    session = Session.objects.create(user=alice, agent=agent, session_name=SECRETS[0])
    run = stored_run(session, SECRETS[1], SECRETS[2])
    token, _ = create_token(alice, "alice laptop")
    dataset = Dataset.objects.create(name="support", created_by=users["manager"])
    (item,) = catalog.add_items(users["manager"], dataset.pk, run_id=run.pk)
    experiment, trial = finished_experiment(agent, item)
    share_token = links.create(session, show_owner=False, show_tools=False, days=None)
    read = record(users["manager"], Action.TRANSCRIPT_READ, "Opened session", subject=alice)
    return World(
        users={"anonymous": None, **users},
        agent=agent,
        session=session,
        run=run,
        message=Message.objects.filter(run=run).first(),  # type: ignore[arg-type]
        call=LLMCall.objects.get(run=run),
        token=token,
        dataset=dataset,
        item=item,
        group=support_group(),
        rule=EvalRule.objects.create(agent=agent, scorers=["json_valid"]),
        experiment=experiment,
        trial=trial,
        budget=Budget.objects.create(user=alice, measure="runs", period="day", limit=1000),
        audit_entry=read,
        share_link=ShareLink.objects.get(),
        share_token=share_token,
    )


def finished_experiment(agent: Agent, item: DatasetItem) -> tuple[Experiment, Trial]:
    """The agent's live version against a draft on the item, both answered."""
    live = AgentVersion.objects.get(pk=agent.live_version_id)
    draft = AgentVersion.objects.of_config(agent, {**config_of(agent), "top_p": 0.5}, live=False)
    experiment = Experiment.objects.create(
        dataset=item.dataset, baseline=live, status=ExperimentStatus.COMPLETED
    )
    experiment.versions.set([live, draft])
    trials = [
        Trial.objects.create(
            experiment=experiment,
            item=item,
            item_uuid=item.pk,
            version=version,
            status=TrialStatus.COMPLETED,
            content="An answer.",
        )
        for version in (live, draft)
    ]
    return experiment, trials[1]


# -- the matrix ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One request; `route` is the URLconf's pattern (or the API's path) it must land on."""

    method: str
    route: str
    expect: dict[str, int | str]
    data: dict[str, Any] = field(default_factory=dict)
    url: str = ""  # when the route alone does not say which URL (admin objects, regexes, queries)

    @property
    def id(self) -> str:
        return f"{self.method} {self.route}"


Answer = int | str


def roles(
    anonymous: Answer,
    alice: Answer,
    bob: Answer,
    support: Answer,
    manager: Answer,
    superuser: Answer,
) -> dict[str, Answer]:
    return dict(zip(ROLES, (anonymous, alice, bob, support, manager, superuser), strict=True))


def staff(support: Answer, manager: Answer, superuser: Answer) -> dict[str, Answer]:
    """An admin page: the admin's login for everyone who is not staff."""
    return roles(ADMIN_LOGIN, ADMIN_LOGIN, ADMIN_LOGIN, support, manager, superuser)


SIGNED_IN = roles(LOGIN, 200, 200, 200, 200, 200)
ONLY_MINE = roles(
    LOGIN, 200, 404, 404, 404, 404
)  # tokens and ratings are one's own, even for staff
PUBLIC = roles(200, 200, 200, 200, 200, 200)
READ_SESSION = roles(LOGIN, 200, 404, 200, 200, 200)  # staff who may view sessions read any
CHANGE_SESSION = roles(LOGIN, 200, 404, 403, 200, 200)  # support may only view
SIGNED_OUT_ONLY = roles(200, 302, 302, 302, 302, 302)
SHARED_PAGE = "share/<str:token>/"

PAGES = [
    Case("GET", "healthz", PUBLIC),
    Case("GET", "favicon.ico", roles(302, 302, 302, 302, 302, 302)),
    Case("GET", "", SIGNED_IN),
    Case("GET", "s/<session_id:session_id>/", READ_SESSION),
    Case("POST", "s/<session_id:session_id>/rename", CHANGE_SESSION, {"session_name": "renamed"}),
    Case("POST", "s/<session_id:session_id>/delete", roles(LOGIN, 204, 404, 403, 204, 204)),
    Case("GET", "s/<session_id:session_id>/settings", READ_SESSION),
    Case("POST", "s/<session_id:session_id>/state", CHANGE_SESSION, {"session_state": '{"a": 1}'}),
    Case("GET", "sessions/", SIGNED_IN),
    Case("GET", "settings/", SIGNED_IN),
    # Only its owner shares a chat: staff who may read it are told so, anyone else finds none.
    Case("GET", "s/<session_id:session_id>/share", roles(LOGIN, 200, 404, 403, 403, 403)),
    Case(
        "POST",
        "s/<session_id:session_id>/share",
        roles(LOGIN, 200, 404, 403, 403, 403),
        {"action": "create"},
    ),
    Case(
        "POST",
        "share-links/<uuid:link_id>/<str:action>",
        roles(LOGIN, 302, *[404] * 4),
        url="share-links/<uuid:link_id>/revoke",
    ),
    # Signed-in people with the link (PARLEY_PUBLIC_SHARE_LINKS opens it to anyone).
    Case("GET", SHARED_PAGE, SIGNED_IN),
    Case("POST", "settings/", roles(LOGIN, 302, 302, 302, 302, 302), {"allow_training": "on"}),
    Case("POST", "runs/<uuid:run_id>/feedback", ONLY_MINE, {"rating": "1"}),
    Case("GET", "tokens/", SIGNED_IN),
    # The new token is shown by the page the form redirects to.
    Case("POST", "tokens/", roles(LOGIN, *[to("/tokens/")] * 5), {"name": "new"}),
    Case("POST", "tokens/<int:token_id>/rename/", roles(LOGIN, 302, *[404] * 4), {"name": "x"}),
    Case("GET", "tokens/<int:token_id>/revoke/", ONLY_MINE),
    Case("POST", "tokens/<int:token_id>/revoke/", roles(LOGIN, 302, *[404] * 4)),
    Case("GET", "accounts/login/", SIGNED_OUT_ONLY),
    Case("POST", "accounts/logout/", roles(*[302] * 6)),
    Case("GET", "accounts/signup/", SIGNED_OUT_ONLY),
    Case("GET", "api/", roles(*[404] * 6)),  # nothing there: the docs are at api/docs
    Case("GET", "api/docs", PUBLIC),
    Case("GET", "api/openapi.json", PUBLIC),
]

STAFF_PAGE = staff(200, 200, 200)
# The admin's page of an app, as its URLconf spells it: every app with a model in the admin.
_LABELS = dict.fromkeys(model._meta.app_label for model in admin.site._registry)
APP_INDEX = f"admin/(?P<app_label>{'|'.join(_LABELS)})/$"
NO_STAFF = staff(403, 403, 403)  # a page the admin refuses to every staff member
DATASET_PAGE = to("/admin/datasets_app/dataset/{object:dataset}/change/")
AGENT_VERSIONS = to("/admin/sessions_app/agent/{object:agent}/change/#versions")
EXPERIMENT = "admin/evals_app/experiment/<uuid:experiment_id>/"
EXPERIMENT_PAGE = to("/admin/evals_app/experiment/{object:experiment}/change/")
# Reading takes "view experiment"; cancelling, resuming and scoring again "change experiment",
# rating "rate experiment" (and reading the dataset's items);
# sending an answer to a dataset also "add dataset item". Forms naming nothing are sent back.
EXPERIMENT_PAGES = [
    Case("GET", f"{EXPERIMENT}progress/", STAFF_PAGE),
    Case("POST", f"{EXPERIMENT}cancel/", staff(403, EXPERIMENT_PAGE, EXPERIMENT_PAGE)),
    Case("POST", f"{EXPERIMENT}resume/", staff(403, EXPERIMENT_PAGE, EXPERIMENT_PAGE)),
    Case("POST", f"{EXPERIMENT}rescore/", staff(403, EXPERIMENT_PAGE, EXPERIMENT_PAGE)),
    Case("GET", f"{EXPERIMENT}report.csv", STAFF_PAGE),
    Case("GET", f"{EXPERIMENT}report.json", STAFF_PAGE),
    Case("GET", f"{EXPERIMENT}rate/", staff(403, 200, 200)),
    Case("POST", f"{EXPERIMENT}rate/", staff(403, *[to(f"/{EXPERIMENT}rate/")] * 2)),
    Case("GET", f"{EXPERIMENT}items/<uuid:trial_id>/", STAFF_PAGE),
    Case(
        "POST",
        f"{EXPERIMENT}items/<uuid:trial_id>/send/",
        staff(403, *[to(f"/{EXPERIMENT}items/<uuid:trial_id>/")] * 2),
    ),
]
ADMIN_SITE = [
    Case("GET", "admin/", STAFF_PAGE),
    Case("GET", "admin/dashboard/", STAFF_PAGE),  # support and manager may view runs and calls
    Case("GET", "admin/dashboard/", STAFF_PAGE, url="admin/dashboard/?source=openai"),
    Case("GET", "admin/login/", roles(200, 200, 200, 302, 302, 302)),
    # The admin's logout sends whoever it does not let in to its index; staff are logged out.
    Case("POST", "admin/logout/", roles(*[to("/admin/")] * 3, *[to("/accounts/login/")] * 3)),
    Case("GET", "admin/password_change/", STAFF_PAGE),
    Case("GET", "admin/password_change/done/", STAFF_PAGE),
    Case("GET", "admin/autocomplete/", NO_STAFF),  # without its parameters
    Case("GET", "admin/jsi18n/", STAFF_PAGE),
    Case(
        "GET",
        "admin/r/<path:content_type_id>/<path:object_id>/",
        staff(404, 404, 404),  # sessions have no page of their own
        url="admin/r/{content_type}/{session_id}/",
    ),
    Case("GET", APP_INDEX, STAFF_PAGE, url="admin/sessions_app/"),
    Case("GET", APP_INDEX, staff(404, 404, 200), url="admin/auth/"),  # no permission in it
    Case("GET", "admin/(?P<url>.*)$", staff(404, 404, 404), url="admin/nowhere/"),
    # The download: the dataset and its items viewed; without a format, back to its page.
    Case(
        "GET",
        "admin/datasets_app/dataset/<uuid:dataset_id>/export/",
        STAFF_PAGE,
        url="admin/datasets_app/dataset/<uuid:dataset_id>/export/?format=openai-chat",
    ),
    Case(
        "GET",
        "admin/datasets_app/dataset/<uuid:dataset_id>/export/",
        staff(DATASET_PAGE, DATASET_PAGE, DATASET_PAGE),
    ),
    Case(
        "GET",
        "admin/datasets_app/dataset/<uuid:dataset_id>/card/",
        STAFF_PAGE,
        url="admin/datasets_app/dataset/<uuid:dataset_id>/card/?format=openai-chat",
    ),
    # Adding to a dataset takes "add dataset item"; a form naming nothing is sent back.
    Case("POST", "admin/datasets_app/datasetitem/collect/", staff(403, to("../"), to("../"))),
    # An agent's versions: compared by whoever may view agents; drafted and promoted by those
    # who may change them (promoting the live version only sends back to the agent's page).
    Case("GET", "admin/sessions_app/agent/<uuid:agent_id>/versions/compare/", STAFF_PAGE),
    Case("GET", "admin/sessions_app/agent/<uuid:agent_id>/versions/new/", staff(403, 200, 200)),
    Case(
        "GET",
        "admin/sessions_app/agent/<uuid:agent_id>/versions/<uuid:version_id>/promote/",
        staff(403, AGENT_VERSIONS, AGENT_VERSIONS),
    ),
    Case(
        "GET",
        "admin/sessions_app/user/<id>/password/",
        staff(403, 200, 200),  # "change user"
        url="admin/sessions_app/user/{alice_id}/password/",
    ),
    *EXPERIMENT_PAGES,
]

# What the admin lets its users add: the other tables are written by the chat and the API.
ADDABLE = {"group", "agent", "dataset", "user", "evalrule", "experiment", "budget"}
# Records no one deletes in the admin: the audit log, and share links (revoked, kept).
KEPT = {"auditentry", "sharelink"}
# The apps whose permissions support and manager hold (tests.support.roles).
OURS = ("sessions_app", "datasets_app", "evals_app", "budgets_app", "audit_app", "shares_app")


def admin_model_cases() -> list[Case]:
    cases = []
    for model in admin.site._registry:
        app, name = model._meta.app_label, model._meta.model_name
        # support and manager hold only these
        ours = app in OURS
        prefix = f"admin/{app}/{name}/"
        obj = f"{prefix}{{object:{name}}}/"
        reads = STAFF_PAGE if ours else staff(403, 403, 200)
        adds = staff(403, 200 if ours else 403, 200) if name in ADDABLE else NO_STAFF
        deletes = NO_STAFF if name in KEPT else staff(403, 200 if ours else 403, 200)
        cases += [
            Case("GET", prefix, reads),
            Case("GET", f"{prefix}add/", adds),
            Case("GET", f"{prefix}<path:object_id>/change/", reads, url=f"{obj}change/"),
            Case("GET", f"{prefix}<path:object_id>/history/", reads, url=f"{obj}history/"),
            Case("GET", f"{prefix}<path:object_id>/delete/", deletes, url=f"{obj}delete/"),
            # The bare object URL sends to its change page, for anyone the admin lets in.
            Case("GET", f"{prefix}<path:object_id>/", staff(302, 302, 302), url=obj),
        ]
    return cases


ADMIN_MODELS = admin_model_cases()

API_SIGNED_IN = roles(401, 200, 200, 200, 200, 200)
API_READ = roles(401, 200, 404, 200, 200, 200)  # alice's object
API_DATASETS_READ = roles(401, 403, 403, 200, 200, 200)  # view dataset (and its items)
API_DATASETS_WRITE = roles(401, 403, 403, 403, 200, 200)
API_EXPERIMENTS_READ = roles(401, 403, 403, 200, 200, 200)  # view experiment
API_EXPERIMENTS_WRITE = roles(401, 403, 403, 403, 200, 200)  # change experiment
API = [
    Case("GET", "/api/agents", API_SIGNED_IN),
    Case("POST", "/api/agents", roles(401, 403, 403, 403, 201, 201), {"name": "New"}),
    Case("GET", "/api/agents/{agent_id}", API_SIGNED_IN),
    Case("PATCH", "/api/agents/{agent_id}", API_DATASETS_WRITE, {"instructions": "Be kind."}),
    Case("GET", "/api/agents/{agent_id}/versions", API_DATASETS_READ),
    Case(
        "POST",
        "/api/agents/{agent_id}/versions",
        roles(401, 403, 403, 403, 201, 201),
        {"instructions": "Be kinder.", "note": "kinder"},
    ),
    Case("POST", "/api/agents/{agent_id}/versions/{version_id}/promote", API_DATASETS_WRITE),
    Case("GET", "/api/sessions", API_SIGNED_IN),
    # Staff who may view sessions list alice's; for bob the filter is ignored: his own, empty.
    Case("GET", "/api/sessions", API_SIGNED_IN, {"user_id": "alice"}),
    Case("POST", "/api/sessions", roles(401, *[201] * 5), {"session_name": "new"}),
    Case("GET", "/api/sessions/{session_id}", API_READ),
    Case(
        "PATCH",
        "/api/sessions/{session_id}",
        roles(401, 200, 404, 403, 200, 200),
        {"session_name": "renamed"},
    ),
    Case("DELETE", "/api/sessions/{session_id}", roles(401, 204, 404, 403, 204, 204)),
    Case("GET", "/api/sessions/{session_id}/runs", API_READ),
    Case("GET", "/api/sessions/{session_id}/messages", API_READ),
    # Staff may read anyone's session, but only its owner speaks in it.
    Case(
        "POST",
        "/api/runs",
        roles(401, 200, 404, 403, 403, 403),
        {"input": "hi", "session_id": "{session_id}"},
    ),
    Case("GET", "/api/runs/{run_id}", API_READ),
    Case("POST", "/api/runs/{run_id}/cancel", roles(401, 200, 404, 403, 200, 200)),
    Case("POST", "/api/runs/{run_id}/feedback", roles(401, 200, *[404] * 4), {"rating": 1}),
    Case("GET", "/api/metrics", API_SIGNED_IN),
    Case("GET", "/api/datasets", API_DATASETS_READ),
    Case("POST", "/api/datasets", roles(401, 403, 403, 403, 201, 201), {"name": "another"}),
    Case("GET", "/api/datasets/{dataset_id}", API_DATASETS_READ),
    Case("GET", "/api/datasets/{dataset_id}/items", API_DATASETS_READ),
    Case(
        "POST",
        "/api/datasets/{dataset_id}/items",
        roles(401, 403, 403, 403, 409, 409),  # the run is in it already: managers get that far
        {"run_id": "{run_id}"},
    ),
    Case(
        "PATCH",
        "/api/datasets/{dataset_id}/items/{item_id}",
        API_DATASETS_WRITE,
        {"status": "accepted"},
    ),
    Case("GET", "/api/datasets/{dataset_id}/export", API_DATASETS_READ, {"format": "openai-chat"}),
    Case("GET", "/api/datasets/{dataset_id}/card", API_DATASETS_READ, {"format": "openai-chat"}),
    Case("GET", "/api/experiments", API_EXPERIMENTS_READ),
    Case(
        "POST",
        "/api/experiments",
        roles(401, 403, 403, 403, 422, 422),  # one agent is not a comparison: managers get that far
        {"dataset_id": "{dataset_id}", "agents": ["{agent_id}"]},
    ),
    Case("GET", "/api/experiments/{experiment_id}", API_EXPERIMENTS_READ),
    Case("POST", "/api/experiments/{experiment_id}/cancel", API_EXPERIMENTS_WRITE),
    Case("POST", "/api/experiments/{experiment_id}/resume", API_EXPERIMENTS_WRITE),
    Case(
        "POST",
        "/api/experiments/{experiment_id}/rescore",
        API_EXPERIMENTS_WRITE,
        {"scorers": ["exact"]},
    ),
    Case("GET", "/api/experiments/{experiment_id}/report", API_EXPERIMENTS_READ),
]
# The permission each 403 of the API names, by operation.
RIGHTS = {
    ("POST", "/api/agents"): "add agent",
    ("PATCH", "/api/agents/{agent_id}"): "change agent",
    ("GET", "/api/agents/{agent_id}/versions"): "view agent",
    ("POST", "/api/agents/{agent_id}/versions"): "change agent",
    ("POST", "/api/agents/{agent_id}/versions/{version_id}/promote"): "change agent",
    ("PATCH", "/api/sessions/{session_id}"): "change session",
    ("DELETE", "/api/sessions/{session_id}"): "delete session",
    ("POST", "/api/runs/{run_id}/cancel"): "change run",
    ("GET", "/api/datasets"): "view dataset",
    ("POST", "/api/datasets"): "add dataset",
    ("GET", "/api/datasets/{dataset_id}"): "view dataset",
    ("GET", "/api/datasets/{dataset_id}/items"): "view dataset item",
    ("POST", "/api/datasets/{dataset_id}/items"): "add dataset item",
    ("PATCH", "/api/datasets/{dataset_id}/items/{item_id}"): "change dataset item",
    ("GET", "/api/datasets/{dataset_id}/export"): "view dataset",
    ("GET", "/api/datasets/{dataset_id}/card"): "view dataset",
    ("GET", "/api/experiments"): "view experiment",
    ("POST", "/api/experiments"): "add experiment",
    ("GET", "/api/experiments/{experiment_id}"): "view experiment",
    ("POST", "/api/experiments/{experiment_id}/cancel"): "change experiment",
    ("POST", "/api/experiments/{experiment_id}/resume"): "change experiment",
    ("POST", "/api/experiments/{experiment_id}/rescore"): "change experiment",
    ("GET", "/api/experiments/{experiment_id}/report"): "view experiment",
}


def fill(text: str, world: World) -> str:
    for placeholder, value in world.placeholders().items():
        text = text.replace(placeholder, value)
    text = re.sub(r"\{object:(\w+)\}", lambda m: world.admin_object(m.group(1)), text)
    content_type = ContentType.objects.get_for_model(Session).pk
    return text.replace("{content_type}", str(content_type)).replace(
        "{alice_id}",
        str(world.users["alice"].pk),  # type: ignore[union-attr]
    )


def client_as(world: World, role: str, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    user = world.users[role]
    if user is not None:
        client.force_login(user)
    return client


def assert_outcome(response: Any, expected: int | str, path: str) -> None:
    if expected == LOGIN:
        assert response.status_code == 302, path
        assert response["Location"].startswith("/accounts/login/?next="), response["Location"]
    elif expected == ADMIN_LOGIN:
        assert response.status_code == 302, path
        assert response["Location"].startswith("/admin/login/?next="), response["Location"]
    elif isinstance(expected, str):
        assert response.status_code == 302, path
        assert response["Location"] == expected.removeprefix("→"), response["Location"]
    else:
        assert response.status_code == expected, (path, response.content[:300])


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def assert_no_secret(response: Any, role: str) -> None:
    """Nobody but alice and staff who may view sessions sees alice's data, whatever the status."""
    if role in READERS:
        return
    body = body_of(response)
    for secret in SECRETS:
        assert secret.encode() not in body, (role, secret)


def page_request(world: World, role: str, case: Case) -> Any:
    path = "/" + fill(case.url or case.route, world)
    match = resolve(path.split("?")[0])
    assert match.route == case.route, (path, match.route)  # the case is about that route
    client = client_as(world, role)
    return path, client.generic(
        case.method,
        path,
        data=urlencode(case.data),
        content_type="application/x-www-form-urlencoded",
    )


def expected(case: Case, role: str, world: World) -> int | str:
    answer = case.expect[role]
    return fill(answer, world) if isinstance(answer, str) else answer


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", PAGES + ADMIN_SITE + ADMIN_MODELS, ids=lambda c: c.id)
def test_pages(world, role, case, upstream):
    path, response = page_request(world, role, case)
    assert_outcome(response, expected(case, role, world), path)
    # Alice shared her chat: whoever has the link reads it, as she chose.
    if case.route != SHARED_PAGE:
        assert_no_secret(response, role)
    if response.get("Content-Type", "").startswith("text/html") and response.status_code == 200:
        assert "script-src 'self'" in response["Content-Security-Policy"], path


def api_request(world: World, role: str, case: Case, headers: dict[str, str] | None = None) -> Any:
    """The case's request as `role`, with a token of theirs (or these `headers`)."""
    path = fill(case.route, world)
    user = world.users[role]
    if headers is None:
        headers = bearer(user) if user is not None else {}
    body = json.loads(fill(json.dumps(case.data), world)) if case.method != "GET" else None
    if case in ASYNC_API:
        return path, served_request(headers, case.method, path, body)
    client = Client(headers=headers)
    if case.method == "GET":
        return path, client.get(path, case.data)
    return path, client.generic(
        case.method, path, json.dumps(body), content_type="application/json"
    )


# The async operations (starting and stopping runs) read through other threads' connections,
# which see only committed rows.
ASYNC_API = [case for case in API if case.route.startswith("/api/runs") and case.method == "POST"]


def served_request(headers: dict[str, str], method: str, path: str, body: Any) -> HttpResponse:
    """Through the ASGI application with the run engine running, as Django's response."""
    response = request_served(method, path, body, headers)
    return HttpResponse(response.body, status=response.status_code, headers=response.headers)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", [c for c in API if c not in ASYNC_API], ids=lambda c: c.id)
def test_api(world, role, case, upstream):
    check_api(world, role, case)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", ASYNC_API, ids=lambda c: c.id)
def test_async_api(world, role, case, upstream):
    check_api(world, role, case)


def check_api(world: World, role: str, case: Case, limited: bool = False) -> None:
    """`limited`: as alice, through a token limited to an agent none of her objects is of."""
    headers = limited_token(world) if limited else None
    path, response = api_request(world, role, case, headers)
    answer = limited_answer(case) if limited else case.expect[role]
    assert_outcome(response, answer, path)
    assert_no_secret(response, "bob" if limited else role)
    if answer in (401, 403, 404):
        assert set(json.loads(response.content)) == {"detail"}, response.content
    right = RIGHTS.get((case.method, case.route))
    if answer == 403 and right:
        assert json.loads(response.content)["detail"] == f"You need the “{right}” permission."


def test_every_refusal_names_its_permission():
    """Each 403 of the API above is a missing permission, named in RIGHTS, except the owner's
    own right to speak in a session."""
    refused = {(c.method, c.route) for c in API if 403 in c.expect.values()}
    assert refused - set(RIGHTS) == {("POST", "/api/runs")}


@pytest.mark.parametrize("role", ROLES[1:])
def test_metrics_count_everyones_calls_only_for_staff_who_may_view_model_calls(world, role):
    _, response = api_request(world, role, Case("GET", "/api/metrics", {}, {"group_by": "user"}))
    keys = [row["key"] for row in response.json()["data"]]
    assert keys == {"bob": []}.get(role, ["alice"])  # only alice has talked to the model


# -- the OpenAI-compatible doors: tokens only, errors in OpenAI's shape ----------------------------

ASK = [{"role": "user", "content": "Hello"}]
OPENAI_DOORS = [
    Case("GET", "v1/models", roles(401, 200, 200, 200, 200, 200)),
    Case(
        "GET",
        "v1/models/<path:model>",
        roles(401, 200, 200, 200, 200, 200),
        url="v1/models/assistant",
    ),
    # Everyone signed in talks to a listed agent, in a session of their own.
    Case("POST", "v1/chat/completions", API_SIGNED_IN, {"model": "assistant", "messages": ASK}),
    # Naming alice's session: only alice continues it; it is nobody else's, staff's neither.
    Case(
        "POST",
        "v1/chat/completions",
        roles(401, 200, 409, 409, 409, 409),
        {"model": "assistant", "messages": ASK, "metadata": {"session_id": "{session_id}"}},
    ),
    Case("GET", "v1/.*$", roles(404, 404, 404, 404, 404, 404), url="v1/no-such-thing"),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", OPENAI_DOORS, ids=lambda c: f"{c.id} {sorted(c.data)}")
def test_openai_doors(world, role, case, upstream):
    path = "/" + (case.url or case.route)
    user = world.users[role]
    headers = bearer(user) if user is not None else {}
    body = json.loads(fill(json.dumps(case.data), world)) if case.method == "POST" else None
    response = served_request(headers, case.method, path, body)
    assert_outcome(response, case.expect[role], path)
    assert_no_secret(response, role)
    if response.status_code >= 400:
        assert set(json.loads(response.content)) == {"error"}, response.content


# -- a token limited to another agent --------------------------------------------------------------


def limited_token(world: World) -> dict[str, str]:
    elsewhere = Agent.objects.create(name="Elsewhere", model="scripted")
    _, raw = create_token(world.users["alice"], "limited", agents=[elsewhere])
    return {"Authorization": f"Bearer {raw}"}


def limited_answer(case: Case) -> Answer:
    """Through it alice's objects answer as they do to bob; her agent too is missing."""
    if (case.method, case.route) == ("GET", "/api/agents/{agent_id}"):
        return 404
    return case.expect["bob"]


@pytest.mark.parametrize("case", [c for c in API if c not in ASYNC_API], ids=lambda c: c.id)
def test_api_through_a_token_limited_to_another_agent(world, case, upstream):
    check_api(world, "alice", case, limited=True)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", ASYNC_API, ids=lambda c: c.id)
def test_async_api_through_a_token_limited_to_another_agent(world, case, upstream):
    check_api(world, "alice", case, limited=True)


def test_metrics_through_a_token_limited_to_another_agent_count_none_of_alices_calls(world):
    by_user = Case("GET", "/api/metrics", {}, {"group_by": "user"})
    _, response = api_request(world, "alice", by_user, limited_token(world))
    assert response.json()["data"] == []


# -- coverage: no route without its line ---------------------------------------------------------


def url_routes(patterns: list[Any], prefix: str = "") -> set[str]:
    routes: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            prefix_here = prefix + str(pattern.pattern).removeprefix("^")
            routes |= url_routes(pattern.url_patterns, prefix_here)
        elif isinstance(pattern, URLPattern):
            # As a match names it: a regex's leading ^ dropped.
            routes.add(prefix + str(pattern.pattern).removeprefix("^"))
    return routes


def api_path(route: str) -> str:
    return "/" + re.sub(r"<(\w+)>", r"{\1}", route)


def test_every_route_is_in_the_matrix():
    operations = {
        (method.upper(), path)
        for path, methods in api.get_openapi_schema()["paths"].items()
        for method in methods
    }
    in_matrix = {(case.method, case.route) for case in API}
    assert operations == in_matrix

    routes = url_routes(get_resolver().url_patterns)
    api_paths = {path for _, path in operations}
    unlisted = {
        route for route in routes if not (route.startswith("api/") and api_path(route) in api_paths)
    } - {case.route for case in PAGES + ADMIN_SITE + ADMIN_MODELS + OPENAI_DOORS}
    assert unlisted == set()


# -- the chat socket -----------------------------------------------------------------------------

NOT_FOUND = "That chat was not found."
OWNER_ONLY = "Only the owner of a session can run in it."
CHANGE_RUN = "You need the “change run” permission."
PROBE = "Unknown action."  # the answer to a frame sent after each action: what came first
SHOWN, RAN, QUIET = "shows the answer", "starts a run", "says nothing"


@dataclass(frozen=True)
class SocketCase:
    """One frame; each role's answer is SHOWN, RAN, QUIET or the notice refusing it."""

    action: str
    frame: Callable[[World], dict[str, Any]]
    expect: dict[str, str]


def socket_roles(alice: str, bob: str, support: str, manager: str, superuser: str) -> dict:
    return dict(zip(ROLES[1:], (alice, bob, support, manager, superuser), strict=True))


SOCKET = [
    SocketCase(
        "watch",
        lambda w: {"session_id": str(w.session.pk)},
        socket_roles(SHOWN, NOT_FOUND, SHOWN, SHOWN, SHOWN),
    ),
    SocketCase(
        "send",
        lambda w: {"session_id": str(w.session.pk), "input": "one more"},
        socket_roles(RAN, NOT_FOUND, OWNER_ONLY, OWNER_ONLY, OWNER_ONLY),
    ),
    SocketCase(
        "stop",  # a finished run: nothing to stop, for those who may stop it
        lambda w: {"run_id": str(w.run.pk)},
        socket_roles(QUIET, NOT_FOUND, CHANGE_RUN, QUIET, QUIET),
    ),
    SocketCase(
        "regenerate",  # only the owner's: a new answer speaks for whoever asked
        lambda w: {"run_id": str(w.run.pk)},
        socket_roles(RAN, NOT_FOUND, NOT_FOUND, NOT_FOUND, NOT_FOUND),
    ),
]


def test_every_socket_action_is_in_the_matrix():
    assert set(ChatConsumer.ACTIONS) == {case.action for case in SOCKET}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", SOCKET, ids=lambda c: c.action)
async def test_socket(world, role, case, upstream):
    user = world.users[role]
    tab = await open_tab(user)
    if user is None:
        assert await tab.ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
        return
    await tab.send(action=case.action, **case.frame(world))
    await tab.send(action="no-such-action")
    runs = Run.objects.filter(session=world.session)
    expected = case.expect[role]
    if expected == QUIET:
        assert PROBE in await tab.ws.receive_from(timeout=10)
    elif expected == SHOWN:
        await tab.until(SECRETS[2])
    elif expected == RAN:
        await until(
            lambda: _count_is(runs.filter(status="COMPLETED"), 2), "the second run did not end"
        )
    else:  # refused with this notice, and nothing done
        assert expected in await tab.ws.receive_from(timeout=10)
        await tab.until(PROBE)
        if role not in READERS:
            assert not any(secret in frame for frame in tab.frames for secret in SECRETS)
        assert await runs.acount() == 1
        assert await runs.filter(status="COMPLETED", cancel_requested=False).acount() == 1
    await tab.close()


async def _count_is(runs: Any, n: int) -> bool:
    return await runs.acount() == n
