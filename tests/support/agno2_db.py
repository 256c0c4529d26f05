"""Real Agno 2.x databases for the import tests: Agno itself runs its agents against the scripted
upstream and stores their sessions, as a team using Agno would have them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agno.agent import Agent
from agno.db.base import BaseDb, SessionType
from agno.db.sqlite import SqliteDb
from agno.models.openai import OpenAIChat
from agno.session import AgentSession
from agno.team import Team

from testkit.upstream import Reply, ScriptedUpstream

os.environ.setdefault("AGNO_TELEMETRY", "false")

SUMMARY = Reply(json.dumps({"summary": "Bob plans a trip to Rome in May.", "topics": ["travel"]}))


def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def sqlite(path: Path) -> SqliteDb:
    return SqliteDb(db_file=str(path))


def _agents(db: BaseDb, upstream: ScriptedUpstream) -> tuple[Agent, Agent, Team]:
    model = OpenAIChat(id="scripted", base_url=upstream.base_url, api_key="test-key")
    weatherbot = Agent(
        id="weather-agent",
        name="Weatherbot",
        model=model,
        db=db,
        instructions="Be brief.",
        tools=[weather],
        add_history_to_context=True,
        telemetry=False,
    )
    planner = Agent(
        id="planner",
        name="Planner",
        model=model,
        db=db,
        session_state={"destination": None},
        add_session_state_to_context=True,
        enable_session_summaries=True,
        add_history_to_context=True,
        telemetry=False,
    )
    crew = Team(id="crew", name="Crew", members=[planner], model=model, db=db, telemetry=False)
    return weatherbot, planner, crew


def build(db: BaseDb, upstream: ScriptedUpstream) -> None:
    """Alice's weather chat (a tool call among three turns) and a second chat with a UUID id,
    Bob's trip planning (state and a summary), and a team session of Alice's."""
    weatherbot, planner, crew = _agents(db, upstream)
    upstream.script(Reply("Hello Alice."))
    weatherbot.run("hi", session_id="fixed_id_for_demo", user_id="alice")
    upstream.script(
        Reply(tool_calls=[{"id": "call_1", "name": "weather", "arguments": {"city": "Rome"}}]),
        Reply("It is sunny in Rome."),
    )
    weatherbot.run("What is the weather in Rome?", session_id="fixed_id_for_demo", user_id="alice")
    upstream.script(Reply("You are welcome."))
    weatherbot.run("Thanks!", session_id="fixed_id_for_demo", user_id="alice")
    upstream.script(Reply("Go to Rome."), SUMMARY)
    planner.run(
        "Plan a trip.",
        session_id="session_101",
        user_id="bob",
        session_state={"destination": "Rome"},
    )
    upstream.script(Reply("In May."), SUMMARY)
    planner.run("When?", session_id="session_101", user_id="bob")
    upstream.script(Reply("A new chat."))
    weatherbot.run("Start over", user_id="alice")  # Agno makes the id: a UUID
    upstream.script(Reply("Team answer."))
    crew.run("Hello team", session_id="team_1", user_id="alice")


def add_turn(db: BaseDb, upstream: ScriptedUpstream) -> None:
    """Alice comes back to her weather chat for one more turn."""
    weatherbot, _, _ = _agents(db, upstream)
    upstream.script(Reply("Still sunny."))
    weatherbot.run("And now?", session_id="fixed_id_for_demo", user_id="alice")


def stored_sessions(db: BaseDb) -> list[AgentSession]:
    """The agent sessions as Agno reads them back from its own database."""
    return db.get_sessions(session_type=SessionType.AGENT)
