"""Moving the test database between migrations, for the tests of data migrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

Targets = list[tuple[str, str]]


def migrate(targets: Targets) -> Apps:
    """The database at the targets; the models of every migration applied then (other apps
    stay as far as the targets allow)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    graph = executor.loader.graph
    applied = [key for key in executor.loader.applied_migrations if key in graph.nodes]
    return executor.loader.project_state(applied).apps


def latest() -> Apps:
    return migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@contextmanager
def migrated(targets: Targets) -> Iterator[Apps]:
    """The database at the targets for the block, at the latest migrations after it."""
    apps = migrate(targets)
    try:
        yield apps
    finally:
        latest()
