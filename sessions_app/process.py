"""Who this process is: the id stored on the runs it streams, by which other processes tell
whether it is alive and address it."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid

HOSTNAME = socket.gethostname()
WORKER_ID = f"{HOSTNAME}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def being_cancelled() -> bool:
    """Whether this task was asked to stop: a database or Redis client may turn the
    cancellation into another error, and a loop that carries on then never stops."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
