# Session ids become strings (up to 128 characters), so ids chosen by a caller or kept from an
# imported store fit; new ones stay UUIDs. Existing ids keep the text their URLs show.

import re

import sessions_app.ids
from django.db import migrations, models
from django.db.migrations.exceptions import IrreversibleError

# On SQLite Django stored UUIDs as 32 hex digits; on PostgreSQL uuid::varchar is already the
# dashed form. Every column holding a session id gets the dashed form, so URLs stay the same.
SESSION_ID_COLUMNS = [
    ("sessions_app_session", "session_id"),
    ("sessions_app_run", "session_id"),
    ("sessions_app_message", "session_id"),
    ("sessions_app_llmcall", "session_id"),
    ("sessions_app_runday", "session_id"),
]
DASHED = (
    "lower(substr({c}, 1, 8) || '-' || substr({c}, 9, 4) || '-' || substr({c}, 13, 4) || '-' || "
    "substr({c}, 17, 4) || '-' || substr({c}, 21, 12))"
)


def dash_sqlite_ids(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for table, column in SESSION_ID_COLUMNS:
        schema_editor.execute(
            f"UPDATE {table} SET {column} = {DASHED.format(c=column)} "
            f"WHERE length({column}) = 32 AND {column} NOT GLOB '*[^0-9a-fA-F]*'"
        )


# What a uuid column can take back: 32 hex digits, or the dashed form.
UUID_TEXT = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def refuse_chosen_ids(schema_editor, columns):
    """Undoing this would mangle or lose a session id that is not a UUID: stop instead."""
    with schema_editor.connection.cursor() as cursor:
        for table, column in columns:
            cursor.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL")
            chosen = [v for (v,) in cursor.fetchall() if not UUID_TEXT.fullmatch(str(v))]
            if chosen:
                raise IrreversibleError(
                    f"Cannot turn session ids back into UUIDs: {table}.{column} holds "
                    f"{len(chosen)} id(s) that are not UUIDs (such as {chosen[0]!r}). "
                    "Delete or rename those sessions first."
                )


def undash_sqlite_ids(apps, schema_editor):
    refuse_chosen_ids(schema_editor, SESSION_ID_COLUMNS)
    if schema_editor.connection.vendor != "sqlite":
        return
    for table, column in SESSION_ID_COLUMNS:
        schema_editor.execute(
            f"UPDATE {table} SET {column} = replace({column}, '-', '') WHERE length({column}) = 36"
        )


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0008_login_failures'),
    ]

    operations = [
        migrations.AlterField(
            model_name='runday',
            name='session_id',
            field=models.CharField(max_length=128),
        ),
        migrations.AlterField(
            model_name='session',
            name='session_id',
            field=models.CharField(default=sessions_app.ids.new_session_id, editable=False, max_length=128, primary_key=True, serialize=False),
        ),
        migrations.RunPython(dash_sqlite_ids, undash_sqlite_ids),
    ]
