"""The ids of a paused run's calls, as the model made them and as its client is given them.

The model and its endpoint keep their own ids (some endpoints accept only ids of their own
shape); the client is given `call_<run id>_<the model's id>`, which says which run a result
answers, so that any process can take the run up again from the result alone.
"""

from __future__ import annotations

import re
import secrets
import string
import uuid
from typing import Any

CLIENT_ID = re.compile(r"call_([0-9a-f]{32})_(.+)", re.DOTALL)
ALPHANUMERIC = string.ascii_letters + string.digits


def with_ids(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model's calls, each with an id: one the endpoint left out is made (nine letters and
    digits, a shape every endpoint takes)."""
    return [call if call.get("id") else {**call, "id": _made_id()} for call in calls]


def for_client(run_id: uuid.UUID, call: dict[str, Any]) -> dict[str, Any]:
    return {**call, "id": f"call_{run_id.hex}_{call['id']}"}


def named(client_id: str) -> tuple[uuid.UUID, str] | None:
    """The run a client's call id names and the model's id of the call, if it names one."""
    found = CLIENT_ID.fullmatch(client_id)
    return (uuid.UUID(found[1]), found[2]) if found else None


def answered(results: dict[str, str]) -> tuple[uuid.UUID, dict[str, str]] | None:
    """The run that results keyed by the client's call ids answer, and the results keyed by
    the model's ids; None unless each names a call of that one run."""
    found = [named(client_id) for client_id in results]
    runs = {pair[0] for pair in found if pair is not None}
    if None in found or len(runs) != 1:
        return None
    return runs.pop(), {pair[1]: text for pair, text in zip(found, results.values(), strict=True)}


def _made_id() -> str:
    return "".join(secrets.choice(ALPHANUMERIC) for _ in range(9))
