"""The statements that start, save and finish a run, written as SQL once per database.

Starting a run reads the token's user, the session with its agent (and the agent the run names,
when that is another), the session's last position and whether a run is active in it, and the
history the model is sent; then it writes the run, its two messages (and a new session), and bumps
the session's date. Through the ORM each of those cost 0.5 to 4 ms of CPU building and compiling
its statement (the history's window query the most), against 0.1 ms for the database to run it:
together more than everything else Parley adds to the first token, and at a hundred users pressing
Send at once, seconds of the one thread all database work shares. A streaming run's checkpoints and
its finish are conditional UPDATEs of the same kind, up to fifty a second under load
(PARLEY_COALESCE_RUNS).

Here each statement's text is made once per database, from the models' own table and column
names. Rows read become model instances the way the ORM's iterator makes them (Django's
converters for each column, then `Model.from_db`); values written are prepared the way its
insert prepares them (`pre_save`, then `get_db_prep_save`). The statements are plain SQL that
SQLite (3.35 and later: a window function, RETURNING) and PostgreSQL both run as written;
tests compare every result with the ORM's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from sessions_app.models import (
    ACTIVE_STATUSES,
    Agent,
    ApiToken,
    LLMCall,
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
        self.converters: list[tuple[int, list[Any], Any]] = []
        for i, field in enumerate(fields):
            found, column = _converters(field, connection)
            if found:
                self.converters.append((i, found, column))

    def pk(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        """A primary key as read from the database, as the model holds it."""
        return _convert(self.model._meta.pk, value, connection)

    def load(self, row: Sequence[Any], start: int, connection: BaseDatabaseWrapper) -> Any:
        values = list(row[start : start + self.width])
        for i, converters, column in self.converters:
            value = values[i]
            for convert in converters:
                value = convert(value, column, connection)
            values[i] = value
        return self.model.from_db(connection.alias, self.attnames, values)


def _converters(field: Field, connection: BaseDatabaseWrapper) -> tuple[list[Any], Any]:
    """What the ORM applies to a column of `field` read back, and the column expression the
    converters are given."""
    column = field.get_col(field.model._meta.db_table)
    return connection.ops.get_db_converters(column) + field.get_db_converters(connection), column


def _convert(field: Field, value: Any, connection: BaseDatabaseWrapper) -> Any:
    converters, column = _converters(field, connection)
    for convert in converters:
        value = convert(value, column, connection)
    return value


class _Insert:
    """INSERT of whole new instances, each value prepared as the ORM's insert prepares it
    (`pre_save` fills auto_now_add dates, `get_db_prep_save` adapts the value), in batches the
    database accepts; keys the database makes (auto ids) are read back with RETURNING."""

    def __init__(self, model: type[Model], connection: BaseDatabaseWrapper) -> None:
        quote = connection.ops.quote_name
        concrete = model._meta.concrete_fields
        self.fields = [f for f in concrete if not f.db_returning]
        self.returning = [f for f in concrete if f.db_returning]
        names = ", ".join(quote(f.column) for f in self.fields)
        self.head = f"INSERT INTO {quote(model._meta.db_table)} ({names}) VALUES "
        self.row = f"({_placeholders(len(self.fields))})"
        self.tail = (
            " RETURNING " + ", ".join(quote(f.column) for f in self.returning)
            if self.returning
            else ""
        )

    def __call__(self, objs: Sequence[Model], connection: BaseDatabaseWrapper) -> None:
        size = max(connection.ops.bulk_batch_size(self.fields, objs), 1)
        for at in range(0, len(objs), size):
            batch = objs[at : at + size]
            params = [
                field.get_db_prep_save(field.pre_save(obj, True), connection)
                for obj in batch
                for field in self.fields
            ]
            sql = self.head + ", ".join([self.row] * len(batch)) + self.tail
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                if not self.returning:
                    continue
                returned = cursor.fetchall()
            for obj, row in zip(batch, returned, strict=True):
                for field, value in zip(self.returning, row, strict=True):
                    setattr(obj, field.attname, _convert(field, value, connection))
        for obj in objs:
            obj._state.adding = False
            obj._state.db = connection.alias


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
        self.inserts = {
            model: _Insert(model, connection) for model in (Session, Run, Message, LLMCall)
        }
        self.updates: dict[tuple[Any, ...], str] = {}  # made at first use, see `update`
        self.touch = (
            f"UPDATE {table(Session)} SET {col(Session, 'updated_at')} = %s "
            f"WHERE {col(Session, 'session_id')} IN ({{}})"
        )
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
        self.agents = (
            f"SELECT {self.agent.sql} FROM {table(Agent)} a "
            f"WHERE a.{col(Agent, 'agent_id')} IN ({{}})"
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
def _statements(alias: str) -> _Statements:
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
    return _statements(using)


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


def agents(agent_ids: Sequence[uuid.UUID]) -> list[Agent]:
    """The agents with these ids (a run may name another agent than its session's)."""
    if not agent_ids:
        return []
    st = _here()
    sql = st.agents.format(_placeholders(len(agent_ids)))
    connection, rows = _execute(sql, _uuids(Agent, agent_ids))
    return [st.agent.load(row, 0, connection) for row in rows]


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


def insert(objs: Sequence[Model]) -> None:
    """Write these new sessions, runs or messages (all of one model), as bulk_create would:
    auto_now_add dates filled in, auto ids set on the instances."""
    if not objs:
        return
    connection = connections["default"]
    if not connection.features.can_return_rows_from_bulk_insert:
        type(objs[0]).objects.bulk_create(objs)  # an SQLite older than 3.35
        return
    _here().inserts[type(objs[0])](objs, connection)


def touch_sessions(session_ids: Sequence[uuid.UUID], now: datetime) -> None:
    """Set these sessions' updated_at to `now`, so they sort first."""
    if not session_ids:
        return
    connection = connections["default"]
    stamp = Session._meta.get_field("updated_at").get_db_prep_save(now, connection)
    sql = _here().touch.format(_placeholders(len(session_ids)))
    with connection.cursor() as cursor:
        cursor.execute(sql, [stamp, *_uuids(Session, session_ids)])


def update(model: type[Model], pk: Any, values: dict[str, Any], **where: Any) -> int:
    """UPDATE one row by primary key, only while `where` holds (`field=value`, or
    `field__in=[...]`), as `Model.objects.filter(pk=pk, **where).update(**values)` would;
    the number of rows changed (0 when the condition no longer holds)."""
    connection = connections["default"]
    meta = model._meta
    # (field name, how many values it is tested against; 0 for equality)
    tests = [
        (name.removesuffix("__in"), len(value) if name.endswith("__in") else 0)
        for name, value in where.items()
    ]
    st = _here()
    key = (model, tuple(values), tuple(tests))
    sql = st.updates.get(key)
    if sql is None:
        q = connection.ops.quote_name
        sets = ", ".join(f"{q(meta.get_field(name).column)} = %s" for name in values)
        clauses = [f"{q(meta.pk.column)} = %s"] + [
            f"{q(meta.get_field(name).column)} "
            + (f"IN ({_placeholders(size)})" if size else "= %s")
            for name, size in tests
        ]
        sql = f"UPDATE {q(meta.db_table)} SET {sets} WHERE {' AND '.join(clauses)}"
        st.updates[key] = sql
    params = [meta.get_field(n).get_db_prep_save(v, connection) for n, v in values.items()]
    params.append(meta.pk.get_db_prep_value(pk, connection))
    for (name, size), value in zip(tests, where.values(), strict=True):
        field = meta.get_field(name)
        params += [field.get_db_prep_value(one, connection) for one in (value if size else [value])]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
