# `reviewed_at` now says when a person gave an item its status, and few-shot examples are only
# items a person accepted. Items a rule added as accepted or rejected were stamped as they were
# made; they were never reviewed, so their stamp goes. They are recognisable: added by no one,
# stamped just before their row was created (a review always comes later). An item whose adder
# has been deleted since looks the same and waits for a review too.

from django.db import migrations
from django.db.models import F


def unstamp_rule_verdicts(apps, schema_editor):
    DatasetItem = apps.get_model("datasets_app", "DatasetItem")
    DatasetItem.objects.filter(
        added_by__isnull=True, reviewed_at__isnull=False, reviewed_at__lte=F("created_at")
    ).update(reviewed_at=None)


class Migration(migrations.Migration):
    dependencies = [
        ("datasets_app", "0002_session_string_ids"),
    ]

    operations = [
        # Undone, the stamps stay away: when those items were made is still `created_at`.
        migrations.RunPython(unstamp_rule_verdicts, migrations.RunPython.noop),
    ]
