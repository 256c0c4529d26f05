# Session ids become strings (up to 128 characters), so ids chosen by a caller or kept from an
# imported store fit; new ones stay UUIDs. Existing ids keep the text their URLs show.

import sessions_app.ids
from django.db import migrations, models

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


def undash_sqlite_ids(apps, schema_editor):
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
