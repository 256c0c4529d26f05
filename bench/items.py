"""Datasets for the benchmark's seeds: accepted items written with bulk inserts, in slices, and
their text made of common words. Imported once Django is set up (by `bench.dbtool`)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from bench import seeding
from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus
from datasets_app.services.collect import split_for
from datasets_app.services.snapshot import content_hash

SLICE = 10_000
WORDS = "the of and to in is that for it as with was on be by this are or from at".split()

# Item n's own columns (`messages` at least), made with the slice's random generator.
ItemColumns = Callable[[random.Random, int], dict[str, Any]]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def fresh_dataset(name: str, items: int, owner: Any, columns: ItemColumns) -> Dataset:
    """A new dataset `name` (one of that name deleted first) of `items` accepted items, one
    transaction per slice; each slice's text is the same from one seeding to the next."""
    Dataset.objects.filter(name=name).delete()
    dataset = Dataset.objects.create(name=name)
    for first in range(0, items, SLICE):
        with transaction.atomic():
            _slice(dataset, owner, first, min(SLICE, items - first), columns)
    return dataset


def _slice(dataset: Dataset, owner: Any, first: int, count: int, columns: ItemColumns) -> None:
    rng = random.Random(first)
    start = timezone.now() - timedelta(days=30)
    rows = [columns(rng, first + i) for i in range(count)]
    vary = {key: [row[key] for row in rows] for key in rows[0]}
    ids = [uuid.uuid4() for _ in range(count)]
    moments = [start + timedelta(seconds=first + i) for i in range(count)]
    corrected = vary.get("corrected_answer", [""] * count)
    seeding.write(
        DatasetItem,
        count,
        {
            **vary,
            "item_id": ids,
            "split": [split_for(dataset, item_id) for item_id in ids],
            "content_hash": [
                content_hash(m, c) for m, c in zip(vary["messages"], corrected, strict=True)
            ],
            "source_created_at": moments,
            "created_at": moments,
        },
        dataset_id=dataset.pk,
        owner_id=owner.pk,
        source=ItemSource.RUN,
        model="bench-model",
        status=ItemStatus.ACCEPTED,
    )
