"""Agents made before versions get their configuration as version 1, live, and the runs made so
far are runs of it; saving such an agent unchanged keeps it at version 1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessions_app.models import Agent, AgentVersion, Run, config_of
from tests.support.migrating import latest, migrated

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("sessions_app", "0015_lean_deletion_cascade")]


@pytest.fixture
def before() -> Iterator[object]:
    with migrated(BEFORE) as apps:
        yield apps


def old_run(apps, user, agent, position: int):
    session = apps.get_model("sessions_app", "Session").objects.create(user=user, agent=agent)
    return apps.get_model("sessions_app", "Run").objects.create(
        session=session, user=user, agent=agent, position=position, status="COMPLETED", input="hi"
    )


def test_each_agent_gets_a_live_version_1_and_its_runs_are_of_it(before):
    apps = before
    user = apps.get_model("sessions_app", "User").objects.create(username="alice", password="!")
    agents = apps.get_model("sessions_app", "Agent").objects
    poet = agents.create(name="Poet", model="m", instructions="Rhyme.", num_history_runs=5)
    quiet = agents.create(name="Quiet", model="m", session_state={"mood": "calm"})
    runs = [old_run(apps, user, poet, 1).pk, old_run(apps, user, poet, 2).pk]

    latest()  # through 0016_agent_versions, to the tables today's models read

    for agent in Agent.objects.filter(pk__in=[poet.pk, quiet.pk]):
        (version,) = AgentVersion.objects.filter(agent=agent)
        assert (version.number, version.is_draft, agent.live_version_id) == (1, False, version.pk)
        assert version.config == config_of(agent) and version.promoted_at is not None
    poets = Agent.objects.get(pk=poet.pk).live_version
    assert poets.config["instructions"] == "Rhyme." and poets.config["num_history_runs"] == 5
    assert set(Run.objects.filter(pk__in=runs).values_list("agent_version", flat=True)) == {
        poets.pk
    }


def test_an_agent_saved_unchanged_after_the_migration_stays_at_version_1(before):
    apps = before
    apps.get_model("sessions_app", "Agent").objects.create(name="Poet", model="m")

    latest()  # through 0016_agent_versions, to the tables today's models read

    poet = Agent.objects.get(name="Poet")
    poet.listed = False
    poet.save()
    assert list(poet.versions.values_list("number", flat=True)) == [1]
    poet.instructions = "Rhyme."
    poet.save()
    assert poet.live_version.number == 2
