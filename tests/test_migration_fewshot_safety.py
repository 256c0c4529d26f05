"""Items a rule accepted before `reviewed_at` meant "a person reviewed it" lose their stamp, so
they are no few-shot example until someone accepts them; what people reviewed keeps it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from datasets_app.models import DatasetItem

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("datasets_app", "0002_session_string_ids")]
AFTER = [("datasets_app", "0003_fewshot_safety")]


def migrate(targets: list[tuple[str, str]]):
    """The database at the targets, every other app at its latest; the models of that state."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    apps = {app for app, _ in targets}
    others = [node for node in executor.loader.graph.leaf_nodes() if node[0] not in apps]
    return executor.loader.project_state([*targets, *others]).apps


@pytest.fixture
def before() -> Iterator[object]:
    apps = migrate(BEFORE)
    try:
        yield apps
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def item(apps, dataset, added_by, status: str, reviewed_late: bool = False):
    """An item as the old code made it: stamped as it was made, unless still pending; then,
    for a later review, stamped again."""
    made = apps.get_model("datasets_app", "DatasetItem").objects.create(
        dataset=dataset, source="run", messages=[], split="train", status=status,
        added_by=added_by, reviewed_at=timezone.now() if status != "pending" else None,
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
