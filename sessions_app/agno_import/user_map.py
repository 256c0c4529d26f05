"""The accounts an operator names for Agno users: `agno_id=username` pairs, given one by one or
as a CSV file of two columns (agno_id,username; a first row `agno_id,username` is a header)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from pathlib import Path

HEADER = ["agno_id", "username"]


class MappingError(Exception):
    """The mapping cannot be used; the message says why. Raised before anything is written."""


def read_user_map(pairs: Iterable[str] = (), files: Iterable[str] = ()) -> dict[str, str]:
    """Agno user id -> Parley username, from `--map-user` values and `--map-users` files."""
    mapping: dict[str, str] = {}
    for text in pairs:
        agno_id, sep, username = text.rpartition("=")  # a username never holds "="
        if not sep or not agno_id.strip() or not username.strip():
            raise MappingError(f"--map-user {text!r}: give it as AGNO_ID=USERNAME.")
        _add(mapping, agno_id.strip(), username.strip(), f"--map-user {text!r}")
    for path in files:
        for line, agno_id, username in _csv_rows(path):
            _add(mapping, agno_id, username, f"{path} line {line}")
    return mapping


def _add(mapping: dict[str, str], agno_id: str, username: str, where: str) -> None:
    earlier = mapping.setdefault(agno_id, username)
    if earlier != username:
        raise MappingError(
            f"{where}: Agno user {agno_id!r} is mapped to both {earlier!r} and {username!r}."
        )


def _csv_rows(path: str) -> Iterator[tuple[int, str, str]]:
    """(line number, agno_id, username) for each row that is not blank nor the header."""
    try:
        # utf-8-sig: a spreadsheet's byte-order mark is not part of the first Agno id.
        with Path(path).open(encoding="utf-8-sig", newline="") as file:
            rows = list(csv.reader(file))
    except OSError as exc:
        raise MappingError(f"--map-users {path}: {exc.strerror or exc}.") from exc
    except (UnicodeDecodeError, csv.Error) as exc:
        raise MappingError(f"--map-users {path}: not a UTF-8 CSV file ({exc}).") from exc
    first = True
    for line, row in enumerate(rows, start=1):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if first and [cell.casefold() for cell in cells] == HEADER:
            first = False
            continue
        first = False
        if len(cells) != 2 or not all(cells):
            raise MappingError(f"{path} line {line}: expected two columns, agno_id,username.")
        yield line, cells[0], cells[1]
