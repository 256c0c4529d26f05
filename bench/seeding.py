"""Bulk seeding shared by the benchmark's helper commands (`bench.dbtool`, `bench.dashdata`):
users, their login cookies, rows written column by column, and a database settled after it.

Imported once Django is set up (by `bench.dbtool`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Model
from django.test import Client


def user(username: str, *, staff: bool = False) -> Any:
    found, _ = get_user_model().objects.get_or_create(
        username=username, defaults={"is_staff": staff, "is_superuser": staff}
    )
    return found


def cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


def write(model: type[Model], count: int, vary: dict[str, Sequence[Any]], /, **same: Any) -> None:
    """`count` new rows of `model`: each column in `vary` (by attribute name, `session_id`
    for a foreign key) takes one value per row, every other column the value `same` gives (by
    keyword, so the arguments before it are positional: a run has a field named `model`) or
    else the field's default. Each value is prepared by its field, as the ORM's insert prepares
    it, and a value all rows share is prepared once; no model object is made per row (making
    them and preparing every field of each is where a seeding's time would go)."""
    connection = connections["default"]
    fields = [f for f in model._meta.concrete_fields if not f.db_returning]
    unknown = set(vary) - {f.attname for f in fields}
    if unknown:
        raise ValueError(f"not columns of {model.__name__}: {', '.join(sorted(unknown))}")
    template = model(**same)
    columns = []
    for field in fields:
        values = vary.get(field.attname)
        if values is None:
            shared = field.get_db_prep_save(getattr(template, field.attname), connection)
            columns.append([shared] * count)
        else:
            columns.append([field.get_db_prep_save(value, connection) for value in values])
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(f.column) for f in fields)
    rows = list(zip(*columns, strict=True))  # a short `vary` list raises
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY: ten times the rows per second of an INSERT per row, for the larger seeds.
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        marks = ", ".join(["%s"] * len(fields))
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)


def settle() -> None:
    """What autovacuum does to a live PostgreSQL database soon after a bulk load: planner
    statistics and the visibility map (index-only scans), so pages are timed as they would be
    served on a database in use rather than on one loaded a second ago."""
    connection = connections["default"]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
