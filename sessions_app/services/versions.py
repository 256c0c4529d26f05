"""Agent versions for staff: drafts to try before users chat with them, promoting one, and what
differs between two. Saving an agent makes the versions users chat with (Agent.save); the admin
and the API ask everything else here, with the same rights: viewing versions takes the “view
agent” permission, drafting and promoting the “change agent” one."""

from __future__ import annotations

from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max, QuerySet

from sessions_app.models import VERSIONED_FIELDS, Agent, AgentVersion, User, config_hash, config_of
from sessions_app.services import examples, statesize
from sessions_app.services.access import NotFound, get_agent_for_user
from sessions_app.services.permissions import Action, require

# A draft's changes name versioned fields, the few-shot dataset also by its id (as the API does).
SETTABLE = frozenset(VERSIONED_FIELDS) | {
    Agent._meta.get_field(name).attname for name in VERSIONED_FIELDS
}
_UNVERSIONED = [f.name for f in Agent._meta.concrete_fields if f.name not in VERSIONED_FIELDS]

State = Literal["draft", "live", "past"]


class InvalidConfig(ValueError):
    """A configuration the agent's form would refuse: its problems, by field."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{name}: {' '.join(m)}" for name, m in problems.items()))


# -- gates -------------------------------------------------------------------------------------


def agent_for_user(user: User, agent_id: Any, action: Action = "view") -> Agent:
    """An agent whose versions `user` may see (or, with "change", draft and promote)."""
    require(user, action, Agent)
    return get_agent_for_user(user, agent_id)


def versions_for_user(user: User, agent_id: Any) -> QuerySet[AgentVersion]:
    return with_run_counts(agent_for_user(user, agent_id).versions.all())


def get_version_for_user(
    user: User, agent_id: Any, version_id: Any, action: Action = "view"
) -> AgentVersion:
    """One version of one agent; a version of another agent is not found, like a missing one."""
    agent = agent_for_user(user, agent_id, action)
    version = with_run_counts(agent.versions.filter(pk=version_id)).first()
    if version is None:
        raise NotFound
    return version


def with_run_counts(versions: QuerySet[AgentVersion]) -> QuerySet[AgentVersion]:
    """Each version with its agent, its author and `run_count`, the runs made with it."""
    return versions.select_related("agent", "created_by").annotate(run_count=Count("runs"))


def state(version: AgentVersion) -> State:
    """A draft, the version users chat with now, or one they chatted with before."""
    if version.is_draft:
        return "draft"
    return "live" if version.agent.live_version_id == version.pk else "past"


# -- writes ------------------------------------------------------------------------------------


def validate(agent: Agent) -> None:
    """Check the versioned fields of `agent` as saving it from the admin or the API does, and
    leave them as the fields read them (InvalidConfig, StateTooLarge, or the few-shot source's
    refusal of a dataset whose items skip review)."""
    try:
        agent.full_clean(exclude=_UNVERSIONED, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise InvalidConfig(exc.message_dict) from exc
    statesize.check("session_state", agent.session_state)
    examples.check_dataset(agent.fewshot_dataset_id)


def _configured(agent: Agent, changes: dict[str, Any]) -> Agent:
    """The agent's live configuration with `changes`, validated; an object never saved."""
    unknown = sorted(set(changes) - SETTABLE)
    if unknown:
        raise InvalidConfig({name: ["Not a versioned field."] for name in unknown})
    if "fewshot_dataset_id" in changes:  # an unknown one is NotFound, as when changing the agent
        examples.check_dataset(changes["fewshot_dataset_id"])
    candidate = Agent.objects.get(pk=agent.pk)
    for name, value in changes.items():
        setattr(candidate, name, value)
    if "model" in changes:  # as when changing the agent: empty is the deployment's model
        candidate.model = (candidate.model or "").strip() or settings.LLM_MODEL
    validate(candidate)
    return candidate


def draft(
    agent: Agent, changes: dict[str, Any], user: User, note: str = ""
) -> tuple[AgentVersion, bool]:
    """(the version, whether it is new): see create_draft."""
    require(user, "change", Agent)
    config = config_of(_configured(agent, changes))
    with transaction.atomic():
        found = agent.versions.filter(config_hash=config_hash(config)).order_by("number").first()
        if found is not None:
            return found, False
        version = AgentVersion.objects.of_config(agent, config, live=False)
        version.note, version.created_by = note.strip(), user
        version.save(update_fields=["note", "created_by"])
    return version, True


def create_draft(agent: Agent, changes: dict[str, Any], user: User, note: str = "") -> AgentVersion:
    """A version of `agent` with `changes` over its live configuration, for experiments: users
    go on chatting with the live one until it is promoted, and the agent is left unchanged. A
    configuration the agent has a version of already (live, past or draft) is that version."""
    return draft(agent, changes, user, note)[0]


def promote(version: AgentVersion, user: User) -> Agent:
    """Make `version` the one users chat with: its configuration copied onto the agent and
    saved, so a draft becomes live itself (Agent.save finds it by its configuration)."""
    require(user, "change", Agent)
    configured = version.as_agent()
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=version.agent_id)
        for name in VERSIONED_FIELDS:
            attname = Agent._meta.get_field(name).attname
            setattr(agent, attname, getattr(configured, attname))
        validate(agent)  # its dataset may have gone since, or now take items unreviewed
        agent.save()
    return agent


def save_agent(agent: Agent, user: User | None, **kwargs: Any) -> None:
    """Save `agent` (Agent.save's arguments); a version the save makes is put down to `user`."""
    with transaction.atomic():
        last = AgentVersion.objects.filter(agent_id=agent.pk).aggregate(n=Max("number"))["n"]
        agent.save(**kwargs)
        made = AgentVersion.objects.filter(pk=agent.live_version_id, number__gt=last or 0)
        made.filter(created_by=None).update(created_by=user)


# -- reading -----------------------------------------------------------------------------------


def full_config(version: AgentVersion) -> dict[str, Any]:
    """The version's configuration; a field versioned after it was made has its default, as a
    run of it would (AgentVersion.as_agent)."""
    defaults = {name: Agent._meta.get_field(name).get_default() for name in VERSIONED_FIELDS}
    return {name: version.config.get(name, defaults[name]) for name in VERSIONED_FIELDS}


def diff(a: AgentVersion, b: AgentVersion) -> list[tuple[str, Any, Any]]:
    """(field, value in a, value in b) for each versioned field that differs, in field order."""
    before, after = full_config(a), full_config(b)
    return [
        (name, before[name], after[name])
        for name in VERSIONED_FIELDS
        if before[name] != after[name]
    ]
