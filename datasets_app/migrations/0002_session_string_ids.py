# Items keep the id of the session they came from as text, like the session itself
# (sessions_app 0008): the dashed form on SQLite too.

from django.db import migrations, models

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


def undash_sqlite_ids(apps, schema_editor):
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
