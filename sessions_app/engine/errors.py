"""Why a run was refused or did not finish, as adapters show it."""

from __future__ import annotations

# A run left unfinished because its process stopped (or was killed).
INTERRUPTED = "The server stopped before this answer finished."
# An answer whose end could not be stored: the database stayed unavailable.
UNSAVED = "This answer could not be saved: the database is unavailable."
# Not a failure: a completed answer the model stopped at its length limit (finish_reason "length").
CUT = "This answer reached the model's length limit and was cut there."


class RunConflict(Exception):
    """A run is already in progress in that session."""


class InputError(ValueError):
    """The input cannot be run; `status` is 400 (empty), 413 (too large) or 422 (malformed)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class NotServing(Exception):
    """The engine is stopping (the server shuts down): no new run starts in this process."""
