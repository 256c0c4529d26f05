"""The load test of one deployment (test_load.py), through one proxy in front of two hosts
(tests/deployed/hosts.py), their clocks true."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions_app.models import Run
from testkit.parley import ParleyProcess
from testkit.upstream import ScriptedUpstream
from tests.deployed import test_load as load
from tests.deployed.hosts import front, two_hosts

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent")]


def test_two_hundred_users_through_two_hosts_each_see_only_their_own_answer(
    serve_environment, tmp_path, upstream: ScriptedUpstream, settings
):
    static = Path(serve_environment["STATIC_ROOT"])
    with (
        two_hosts(serve_environment, tmp_path, {}) as hosts,
        front(hosts, static, tmp_path / "front") as url,
    ):
        site = ParleyProcess(serve_environment, int(url.rpartition(":")[2]))  # its URLs only
        users = load.load_users(serve_environment["SECRET_KEY"], settings)
        received = load.in_a_thread_of_its_own(site, upstream, users)
    for user, seen in zip(users, received, strict=True):
        load.assert_only_its_own(user, seen)
    assert len({seen.run_id for seen in received}) == load.USERS
    load.assert_stored_as_run(users, received)
    workers = Run.objects.filter(pk__in=[seen.run_id for seen in received]).values_list("worker")
    assert {worker.split(":")[0] for (worker,) in workers} == {"host-a", "host-b"}
