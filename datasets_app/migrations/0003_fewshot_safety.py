# `reviewed_at` now says when a person gave an item its status, and few-shot examples are only
# items a person accepted. Items a rule added as accepted or rejected were stamped as they were
# made; they were never reviewed, so their stamp goes.
#
# Rules only ever add runs, by no one, stamped just before the row was created (a later review
# stamps later). So a session or pair item, or an item someone still on record added, is a
# person's and keeps its stamp, and so does one reviewed after it was made, whoever added it.
# Left: run items added by no one and stamped as made. A rule's verdict looks like that; so does
# a run added by a person whose account was deleted since, and a rule's item a person accepted
# again (the old code kept the first stamp when the status stayed). Nothing tells these apart,
# so all lose the stamp (no unreviewed words in a prompt) and the count is printed: staff
# re-review them, among the items "added by a rule", to bring them back as examples.

from django.db import migrations
from django.db.models import Count, F


def unstamp_rule_verdicts(apps, schema_editor):
    DatasetItem = apps.get_model("datasets_app", "DatasetItem")
    unsure = DatasetItem.objects.filter(
        source="run", added_by__isnull=True, reviewed_at__isnull=False,
        reviewed_at__lte=F("created_at"),
    )  # fmt: skip
    by_dataset = list(
        unsure.order_by("dataset__name").values_list("dataset__name").annotate(n=Count("pk"))
    )
    unsure.update(reviewed_at=None)
    if by_dataset:
        total = sum(n for _, n in by_dataset)
        where = ", ".join(f"{n} in “{name}”" for name, n in by_dataset)
        print(
            f"\n  {total} run item(s) added by no one lost their review stamp ({where}): a "
            "rule's verdicts, or items of people whose account is gone. They are no few-shot "
            "example until someone accepts them again."
        )


class Migration(migrations.Migration):
    dependencies = [
        ("datasets_app", "0002_session_string_ids"),
    ]

    operations = [
        # Undone, the stamps stay away: when those items were made is still `created_at`.
        migrations.RunPython(unstamp_rule_verdicts, migrations.RunPython.noop),
    ]
