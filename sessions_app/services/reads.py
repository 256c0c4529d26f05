"""The reads on the way to a run's first token, as SQL written once per database.

Starting a run reads the token's user, the session with its agent, the session's last position
and whether a run is active in it, and the history the model is sent. Through the ORM each of
those cost 1 to 4 ms of CPU building and compiling its query (the history's window query the
most), against 0.1 ms for the database to answer it: together more than everything else Parley
adds to the first token, and at a hundred users pressing Send at once, seconds of one thread.

Here each statement's text is made once per database connection's vendor, from the models'
own table and column names, and its rows become model instances the way the ORM's iterator
makes them: Django's converters for each column (UUIDs and datetimes on SQLite, JSON
everywhere), then `Model.from_db`. Parameters are prepared by their fields. The statements are
plain SELECTs that SQLite (3.25 and later, for the window function) and PostgreSQL both run as
written; tests compare every result with the ORM's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from sessions_app.models import (
    ACTIVE_STATUSES,
    Agent,
    ApiToken,
    Message,
    Role,
    Run,
    RunStatus,
    Session,
    User,
)


class _Columns:
    """A model's concrete columns under a table alias, and how to turn them back into an
    instance of the model (the ORM's converters, then `from_db`)."""

    def __init__(self, model: type[Model], alias: str, connection: BaseDatabaseWrapper) -> None:
        fields = model._meta.concrete_fields
        quote = connection.ops.quote_name
        self.model = model
        self.width = len(fields)
        self.attnames = [field.attname for field in fields]
        self.sql = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
        self.converters: list[tuple[int, list[Callable[..., Any]], Any]] = []
        for i, field in enumerate(fields):
            column = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
            if found:
                self.converters.append((i, found, column))
        self.pk_index = fields.index(model._meta.pk)

    def pk(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        """A primary key as read from the database, as the model holds it."""
        for i, converters, column in self.converters:
            if i == self.pk_index:
                for convert in converters:
                    value = convert(value, column, connection)
        return value

    def load(self, row: Sequence[Any], start: int, connection: BaseDatabaseWrapper) -> Any:
        values = list(row[start : start + self.width])
        for i, converters, column in self.converters:
            value = values[i]
            for convert in converters:
                value = convert(value, column, connection)
            values[i] = value
        return self.model.from_db(connection.alias, self.attnames, values)


class _Statements:
    """Every statement of this module for one database connection's vendor."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        q = connection.ops.quote_name

        def table(model: type[Model]) -> str:
            return q(model._meta.db_table)

        def col(model: type[Model], name: str) -> str:
            return q(model._meta.get_field(name).column)

        self.token = _Columns(ApiToken, "t", connection)
        self.user = _Columns(User, "u", connection)
        self.session = _Columns(Session, "s", connection)
        self.agent = _Columns(Agent, "a", connection)
        self.message = _Columns(Message, "m", connection)
        self.tokens = (
            f"SELECT {self.token.sql}, {self.user.sql} FROM {table(ApiToken)} t "
            f"INNER JOIN {table(User)} u ON u.{col(User, 'id')} = t.{col(ApiToken, 'user')} "
            f"WHERE t.{col(ApiToken, 'token_hash')} IN ({{}})"
        )
        self.sessions = (
            f"SELECT {self.session.sql}, {self.agent.sql} FROM {table(Session)} s "
            f"INNER JOIN {table(Agent)} a "
            f"ON a.{col(Agent, 'agent_id')} = s.{col(Session, 'agent')} "
            f"WHERE s.{col(Session, 'session_id')} IN ({{}})"
        )
        self.owned = f" AND s.{col(Session, 'user')} = %s"
        run_session, position, status = (
            col(Run, "session"),
            col(Run, "position"),
            col(Run, "status"),
        )
        active = ", ".join(f"'{s}'" for s in ACTIVE_STATUSES)
        self.run_state = (
            f"SELECT {run_session}, MAX({position}), "
            f"SUM(CASE WHEN {status} IN ({active}) THEN 1 ELSE 0 END) "
            f"FROM {table(Run)} WHERE {run_session} IN ({{}}) GROUP BY {run_session}"
        )
        # The messages of each session's last `%s` completed runs, in conversation order.
        run_pk = col(Run, "run_id")
        self.history = (
            f"SELECT {self.message.sql}, r.{position} FROM {table(Message)} m "
            f"INNER JOIN {table(Run)} r ON r.{run_pk} = m.{col(Message, 'run')} "
            f"WHERE m.{col(Message, 'run')} IN ("
            f"SELECT ranked.{run_pk} FROM ("
            f"SELECT {run_pk}, ROW_NUMBER() OVER "
            f"(PARTITION BY {run_session} ORDER BY {position} DESC) AS {q('rank')} "
            f"FROM {table(Run)} WHERE {run_session} IN ({{}}) "
            f"AND {status} = '{RunStatus.COMPLETED}'"
            f") ranked WHERE ranked.{q('rank')} <= %s"
            f") AND m.{col(Message, 'role')} <> '{Role.SYSTEM}' "
            f"ORDER BY m.{col(Message, 'session')}, r.{position}, m.{col(Message, 'order')}"
        )


@cache
def _statements(vendor: str, alias: str) -> _Statements:
    return _Statements(connections[alias])


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


def _execute(sql: str, params: Iterable[Any], using: str = "default") -> tuple[Any, list[Any]]:
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return connection, cursor.fetchall()


def _pairs(
    sql: str, params: Iterable[Any], first: _Columns, second: _Columns
) -> list[tuple[Any, Any]]:
    """Rows of two models' columns side by side (a join), as pairs of instances."""
    connection, rows = _execute(sql, params)
    return [
        (first.load(row, 0, connection), second.load(row, first.width, connection)) for row in rows
    ]


def _here(using: str = "default") -> _Statements:
    connection = connections[using]
    return _statements(connection.vendor, using)


def _uuids(field_owner: type[Model], values: Iterable[uuid.UUID]) -> list[Any]:
    connection = connections["default"]
    field = field_owner._meta.pk
    return [field.get_db_prep_value(value, connection) for value in values]


def tokens_with_users(digests: Sequence[str]) -> list[ApiToken]:
    """The tokens with these hashes, each with its user loaded (`token.user`)."""
    if not digests:
        return []
    st = _here()
    sql = st.tokens.format(_placeholders(len(digests)))
    found = []
    for token, user in _pairs(sql, digests, st.token, st.user):
        token.user = user
        found.append(token)
    return found


def sessions_with_agents(session_ids: Sequence[uuid.UUID], owner: User | None) -> list[Session]:
    """The sessions with these ids (only `owner`'s, unless None), each with its agent loaded."""
    if not session_ids:
        return []
    st = _here()
    sql = st.sessions.format(_placeholders(len(session_ids)))
    params = _uuids(Session, session_ids)
    if owner is not None:
        sql += st.owned
        params.append(owner.pk)
    found = []
    for session, agent in _pairs(sql, params, st.session, st.agent):
        session.agent = agent
        found.append(session)
    return found


def run_state(session_ids: Sequence[uuid.UUID]) -> dict[Any, tuple[int, bool]]:
    """Each session's last run position and whether a run is active in it; sessions without
    runs are left out."""
    if not session_ids:
        return {}
    st = _here()
    connection, rows = _execute(
        st.run_state.format(_placeholders(len(session_ids))), _uuids(Session, session_ids)
    )
    return {
        st.session.pk(session_id, connection): (int(last), bool(active))
        for session_id, last, active in rows
    }


def last_runs_messages(session_ids: Sequence[uuid.UUID], runs: int) -> list[Message]:
    """The messages (system prompts left out) of each session's last `runs` completed runs,
    ordered by session, run and order; each has `run_position` set."""
    if not session_ids or runs <= 0:
        return []
    st = _here()
    sql = st.history.format(_placeholders(len(session_ids)))
    connection, rows = _execute(sql, [*_uuids(Session, session_ids), runs])
    found = []
    for row in rows:
        message = st.message.load(row, 0, connection)
        message.run_position = row[st.message.width]
        found.append(message)
    return found
