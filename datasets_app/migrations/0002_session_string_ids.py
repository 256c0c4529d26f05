# Items keep the id of the session they came from as text, like the session itself
# (sessions_app 0009): the dashed form on SQLite too.

import re

from django.db import migrations, models
from django.db.migrations.exceptions import IrreversibleError

DASHED = (
    "lower(substr({c}, 1, 8) || '-' || substr({c}, 9, 4) || '-' || substr({c}, 13, 4) || '-' || "
    "substr({c}, 17, 4) || '-' || substr({c}, 21, 12))"
)


def dash_sqlite_ids(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    column = "source_session_id"
    schema_editor.execute(
        f"UPDATE datasets_app_datasetitem SET {column} = {DASHED.format(c=column)} "
        f"WHERE length({column}) = 32 AND {column} NOT GLOB '*[^0-9a-fA-F]*'"
    )


# What a uuid column can take back: 32 hex digits, or the dashed form.
UUID_TEXT = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def refuse_chosen_ids(schema_editor):
    """Undoing this would mangle or lose a session id that is not a UUID: stop instead."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT source_session_id FROM datasets_app_datasetitem "
            "WHERE source_session_id IS NOT NULL"
        )
        chosen = [v for (v,) in cursor.fetchall() if not UUID_TEXT.fullmatch(str(v))]
    if chosen:
        raise IrreversibleError(
            "Cannot turn session ids back into UUIDs: dataset items come from "
            f"{len(chosen)} session(s) whose id is not a UUID (such as {chosen[0]!r}). "
            "Delete those items first."
        )


def undash_sqlite_ids(apps, schema_editor):
    refuse_chosen_ids(schema_editor)
    if schema_editor.connection.vendor != "sqlite":
        return
    schema_editor.execute(
        "UPDATE datasets_app_datasetitem SET source_session_id = replace(source_session_id, '-', '') "
        "WHERE length(source_session_id) = 36"
    )


class Migration(migrations.Migration):

    dependencies = [
        ('datasets_app', '0001_datasets'),
    ]

    operations = [
        migrations.AlterField(
            model_name='datasetitem',
            name='source_session_id',
            field=models.CharField(blank=True, max_length=128, null=True),
        ),
        migrations.RunPython(dash_sqlite_ids, undash_sqlite_ids),
    ]
