"""Items a rule accepted before `reviewed_at` meant "a person reviewed it" lose their stamp, so
they are no few-shot example until someone accepts them; what people reviewed keeps it, and
what cannot be told from a rule's verdict loses it too, counted where migrate reports."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from datasets_app.models import DatasetItem
from tests.support.migrating import migrate, migrated

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("datasets_app", "0002_session_string_ids")]
AFTER = [("datasets_app", "0003_fewshot_safety")]


@pytest.fixture
def before() -> Iterator[object]:
    with migrated(BEFORE) as apps:
        yield apps


def item(apps, dataset, added_by, status: str, reviewed_late: bool = False, source="run"):
    """An item as the old code made it: stamped as it was made, unless still pending; then,
    for a later review, stamped again."""
    made = apps.get_model("datasets_app", "DatasetItem").objects.create(
        dataset=dataset, source=source, messages=[], split="train", status=status,
        source_session_id=str(uuid.uuid4()) if source == "session" else None, added_by=added_by,
        reviewed_at=timezone.now() if status != "pending" else None,
    )  # fmt: skip
    if reviewed_late:
        made.reviewed_at = made.created_at + timedelta(minutes=5)
        made.save(update_fields=["reviewed_at"])
    return made.pk


def test_a_rules_verdict_loses_its_stamp_and_a_persons_keeps_it(before):
    apps = before
    staff = apps.get_model("sessions_app", "User").objects.create(username="root", password="!")
    dataset = apps.get_model("datasets_app", "Dataset").objects.create(name="examples")
    by_rule = item(apps, dataset, None, "accepted")
    rejected_by_rule = item(apps, dataset, None, "rejected")
    added_accepted = item(apps, dataset, staff, "accepted")
    reviewed_later = item(apps, dataset, None, "accepted", reviewed_late=True)
    waiting = item(apps, dataset, None, "pending")

    migrate(AFTER)

    stamped = dict(DatasetItem.objects.values_list("pk", "reviewed_at"))
    assert stamped[by_rule] is None and stamped[rejected_by_rule] is None
    assert stamped[added_accepted] is not None and stamped[reviewed_later] is not None
    assert stamped[waiting] is None


def test_items_of_deleted_accounts_keep_their_stamp_where_no_rule_could_have_added_them(
    before, capsys
):
    apps = before
    users = apps.get_model("sessions_app", "User").objects
    gone = users.create(username="gone", password="!")
    dataset = apps.get_model("datasets_app", "Dataset").objects.create(name="examples")
    session_item = item(apps, dataset, gone, "accepted", source="session")
    run_item = item(apps, dataset, gone, "accepted")
    by_rule = item(apps, dataset, None, "accepted")
    other = apps.get_model("datasets_app", "Dataset").objects.create(name="others")
    rejected_by_rule = item(apps, other, None, "rejected")
    gone.delete()

    migrate(AFTER)

    stamped = dict(DatasetItem.objects.values_list("pk", "reviewed_at"))
    # Rules add runs only: a session nobody is on record for was added by a person.
    assert stamped[session_item] is not None
    # A run can be a rule's: not shown until someone accepts it, and staff are told how many.
    assert stamped[run_item] is None and stamped[by_rule] is None
    assert stamped[rejected_by_rule] is None
    told = " ".join(capsys.readouterr().out.split())
    assert "3 run item(s) added by no one lost their review stamp" in told
    assert "2 in “examples”, 1 in “others”" in told


def test_nothing_is_reported_when_no_stamp_was_taken(before, capsys):
    apps = before
    staff = apps.get_model("sessions_app", "User").objects.create(username="root", password="!")
    dataset = apps.get_model("datasets_app", "Dataset").objects.create(name="examples")
    item(apps, dataset, staff, "accepted")

    migrate(AFTER)

    assert "review stamp" not in capsys.readouterr().out
