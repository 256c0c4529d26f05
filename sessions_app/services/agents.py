"""Agent configs: shared by everyone signed in, created and changed by staff with the right."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from sessions_app.models import VERSIONED_FIELDS, Agent, User
from sessions_app.services import examples, statesize, versions
from sessions_app.services.access import agents_for_user, get_agent_for_user
from sessions_app.services.permissions import require

# What may be set: every versioned field, a foreign key by its id (`fewshot_dataset_id`, as the
# API names it), and the name, which is the one editable field no version records.
UNVERSIONED_EDITABLE = frozenset({"name"})
EDITABLE_FIELDS = UNVERSIONED_EDITABLE | {
    Agent._meta.get_field(name).attname for name in VERSIONED_FIELDS
}


def _check_fields(values: dict[str, Any]) -> None:
    unknown = set(values) - EDITABLE_FIELDS
    if unknown:
        raise ValueError(f"Cannot set {', '.join(sorted(unknown))}.")
    if "session_state" in values and not isinstance(values["session_state"], dict):
        raise ValueError("session_state must be a JSON object.")
    if "session_state" in values:
        statesize.check("session_state", values["session_state"])
    if "name" in values and not str(values["name"]).strip():
        raise ValueError("name must not be blank.")
    if "fewshot_dataset_id" in values:
        # An unknown dataset is a 404, like an unknown agent_id when creating a session; one
        # whose examples would skip review is refused by its app (409 from the datasets API).
        examples.check_dataset(values["fewshot_dataset_id"])


def list_agents(user: User) -> QuerySet[Agent]:
    return agents_for_user(user).select_related("live_version")  # each agent's version number


def create_agent(user: User, **values: Any) -> Agent:
    require(user, "add", Agent)
    _check_fields(values)
    # An agent without a model talks to whatever the deployment configured.
    values["model"] = (values.get("model") or "").strip() or settings.LLM_MODEL
    values["name"] = str(values.get("name", "")).strip()
    agent = Agent(**values)
    versions.save_agent(agent, user, force_insert=True)
    return agent


def update_agent(user: User, agent_id: Any, **changes: Any) -> Agent:
    require(user, "change", Agent)
    _check_fields(changes)
    if "model" in changes:
        changes["model"] = (changes["model"] or "").strip() or settings.LLM_MODEL
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    with transaction.atomic():
        agent = get_agent_for_user(user, agent_id)
        for name, value in changes.items():
            setattr(agent, name, value)
        versions.save_agent(agent, user, update_fields=[*changes, "updated_at"])
    return agent
