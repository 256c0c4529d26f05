"""PostgreSQL restarted or made read-only under a running Parley: what comes after works, the
answer across a restart is kept, a message it cannot store is refused clearly. A private
cluster, so the machine's own server is left alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessions_app.services.outage import READ_ONLY
from testkit.parley import ParleyProcess
from testkit.services import PrivatePostgres
from testkit.upstream import Reply, ScriptedUpstream
from tests.faults.conftest import api_client, parley_env, prepare, sse_events

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        bool(PrivatePostgres.unavailable()), reason=str(PrivatePostgres.unavailable())
    ),
]

TOKENS = 60


@pytest.fixture(scope="module")
def cluster(upstream_server: ScriptedUpstream) -> Iterator[tuple[PrivatePostgres, dict]]:
    """One private cluster for these tests, with a database migrated once, for each to copy;
    and the headers of its user."""
    with PrivatePostgres() as server:
        migrated = ParleyProcess(parley_env(upstream_server, DATABASE_URL=server.url("migrated")))
        server.create_database("migrated")
        yield server, prepare(migrated)


@pytest.fixture
def postgres(cluster: tuple[PrivatePostgres, dict]) -> PrivatePostgres:
    return cluster[0]


@pytest.fixture
def headers(cluster: tuple[PrivatePostgres, dict]) -> dict[str, str]:
    return cluster[1]


@pytest.fixture
def parley(postgres: PrivatePostgres, upstream_server: ScriptedUpstream, request) -> ParleyProcess:
    upstream_server.reset(counters=True)
    env = parley_env(
        upstream_server,
        DATABASE_URL=postgres.create_database(request.node.name[:60], template="migrated"),
        PARLEY_CHECKPOINT_INTERVAL="0.2",
    )
    return ParleyProcess(env)


def test_after_a_restart_of_postgresql_requests_succeed_and_the_answer_across_it_is_kept(
    postgres, parley, headers, upstream_server
):
    api = api_client(parley, headers)
    with parley:
        first = api.post("/api/runs", json={"input": "before"})
        assert first.status_code == 200, first.text
        session_id = first.json()["session_id"]
        # Every request thread has its connection open.
        assert all(api.get("/api/sessions").status_code == 200 for _ in range(20))

        upstream_server.script(Reply(tokens=TOKENS, delay=0.05))
        body = {"input": "across", "session_id": session_id, "stream": True}
        with api.stream("POST", "/api/runs", json=body) as response:
            events = sse_events(response.iter_lines())
            seen = []
            for kind, data in events:
                seen.append((kind, data))
                if kind == "RunContent" and "tok3 " in data["content"]:
                    break
            postgres.restart()  # mid-answer: every connection Parley holds is cut
            seen += list(events)
        run_id = seen[0][1]["run_id"]
        expected = "".join(f"tok{i} " for i in range(TOKENS))
        assert seen[-1][0] == "RunCompleted", seen[-1]
        assert seen[-1][1]["content"] == expected

        # Nothing that comes after the restart fails.
        for _ in range(10):
            for path in ("/api/sessions", f"/api/runs/{run_id}", "/healthz"):
                answer = api.get(path)
                assert answer.status_code == 200, (path, answer.text)
        run = api.get(f"/api/runs/{run_id}").json()
        assert (run["status"], run["content"]) == ("COMPLETED", expected)
        again = api.post("/api/runs", json={"input": "after", "session_id": session_id})
        assert again.status_code == 200, again.text
        assert again.json()["content"] == "Echo: after"
        messages = api.get(f"/api/sessions/{session_id}/messages").json()["data"]
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "before"),
            ("assistant", "Echo: before"),
            ("user", "across"),
            ("assistant", expected),
            ("user", "after"),
            ("assistant", "Echo: after"),
        ]


def test_after_a_restart_of_postgresql_while_idle_the_next_run_starts(postgres, parley, headers):
    api = api_client(parley, headers)
    with parley:
        first = api.post("/api/runs", json={"input": "before"})
        assert first.status_code == 200, first.text
        session_id = first.json()["session_id"]
        postgres.restart()  # nothing in flight: the connections Parley keeps are cut, unused
        again = api.post("/api/runs", json={"input": "after", "session_id": session_id})
        assert again.status_code == 200, again.text
        assert (again.json()["status"], again.json()["content"]) == ("COMPLETED", "Echo: after")


def test_a_read_only_postgresql_refuses_a_new_message_with_503_and_stores_nothing(
    postgres, parley, headers
):
    api = api_client(parley, headers)
    with parley:
        first = api.post("/api/runs", json={"input": "before"})
        assert first.status_code == 200, first.text
        session_id = first.json()["session_id"]
        postgres.set_read_only(True)  # as after a failover to a replica
        try:
            for body in ({"input": "new chat"}, {"input": "more", "session_id": session_id}):
                refused = api.post("/api/runs", json=body)
                assert refused.status_code == 503, refused.text
                assert refused.json()["detail"] == READ_ONLY
            # Reading goes on.
            assert api.get("/api/sessions").json()["meta"]["total_count"] == 1
            assert len(api.get(f"/api/sessions/{session_id}/runs").json()["data"]) == 1
        finally:
            postgres.set_read_only(False)
        again = api.post("/api/runs", json={"input": "after", "session_id": session_id})
        assert again.status_code == 200, again.text
        assert [r["input"] for r in api.get(f"/api/sessions/{session_id}/runs").json()["data"]] == [
            "before",
            "after",
        ]
