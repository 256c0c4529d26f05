"""Database failures that are nobody's request's fault (a full disk, a read-only or unreachable
database), and what to tell the user who met one; every other database error is a bug.

Writes are transactions, so a write refused for one of these left nothing behind.
"""

from __future__ import annotations

from django.db import DatabaseError, InterfaceError, OperationalError

FULL = "The server's storage is full, so nothing was saved. Please try again later."
READ_ONLY = "The database is read-only at the moment, so nothing was saved. Please try again later."
UNAVAILABLE = "The database is unavailable at the moment. Please try again shortly."

# SQLite's result codes and PostgreSQL's SQLSTATEs (classes 08 and 57P: the connection or the
# server went away; 53: out of resources).
_SQLITE_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_CANTOPEN")
_PG_UNAVAILABLE = ("08", "57P", "53")


def describe(exc: BaseException) -> str | None:
    """What to tell the user of `exc`, when it is an outage; None for any other error."""
    if not isinstance(exc, DatabaseError):
        return None
    cause = exc.__cause__
    sqlite = getattr(cause, "sqlite_errorname", None) or ""
    sqlstate = getattr(cause, "sqlstate", None) or ""
    if sqlite == "SQLITE_FULL" or sqlstate == "53100":
        return FULL
    if sqlite.startswith("SQLITE_READONLY") or sqlstate == "25006":
        return READ_ONLY
    if sqlite.startswith(_SQLITE_UNAVAILABLE) or sqlstate.startswith(_PG_UNAVAILABLE):
        return UNAVAILABLE
    # A connection that failed or was closed under us: the driver gives no code then.
    lost = isinstance(exc, OperationalError) and not sqlite and not sqlstate
    return UNAVAILABLE if lost or isinstance(exc, InterfaceError) else None
