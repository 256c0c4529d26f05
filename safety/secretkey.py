"""The SECRET_KEY of an installation that sets none: made once, kept in a file only its owner
reads, the same for every process that starts from this checkout."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def read_or_create(path: Path) -> str:
    """The key in `path`, written there first if the file does not exist yet.

    The new key is written whole to a private temporary file, then linked into place: a link
    refuses an existing name, so of several processes starting together exactly one key wins,
    and no process ever reads a file half written. Every one reads back the winner's.
    """
    try:
        if not path.exists():
            _create(path)
        key = path.read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(
            f"No secret key: SECRET_KEY is not set, and {path} cannot be made or read ({exc}). "
            "Set SECRET_KEY, or SECRET_KEY_FILE to a file this user may write."
        ) from exc
    if len(key) < 32:
        raise ImproperlyConfigured(
            f"{path} holds no usable secret key (under 32 characters): remove it to have a new "
            "one made, or set SECRET_KEY."
        )
    return key


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".secret_key-")
    try:
        with os.fdopen(descriptor, "w") as file:  # mkstemp makes it 0600
            file.write(secrets.token_urlsafe(50) + "\n")
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process was first: its key is the one
    finally:
        os.unlink(temporary)
