"""While the model endpoint is away (unreachable, overloaded, the embedded model restarting), an
experiment's trials wait and ask again, rather than spend every item left on failures in the
second it takes: the first failure pauses them all for a second, the next ones for twice as long
(at most MAX_PAUSE), and each answer that comes resets that. Only after PATIENCE seconds away in
a row do the answers fail with the endpoint's error, to be asked again by a resume.
"""

from __future__ import annotations

import asyncio

FIRST_PAUSE = 1.0
MAX_PAUSE = 30.0
PATIENCE = 300.0


class ModelAway:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.until = 0.0  # no trial asks before this (the loop's clock)
        self.pause = FIRST_PAUSE
        self.since: float | None = None  # the first failure of the spell away

    async def wait(self) -> None:
        """Until the pause, if any, is over (one that grows meanwhile is met at the next ask)."""
        left = self.until - self.loop.time()
        if left > 0:
            await asyncio.sleep(left)

    def failed(self) -> bool:
        """An answer found the endpoint away: whether to ask again (after the pause)."""
        now = self.loop.time()
        if self.since is None:
            self.since = now
        if now - self.since > PATIENCE:
            return False
        if self.until <= now:  # the first of a burst of failures sets the pause
            self.until = now + self.pause
            self.pause = min(self.pause * 2, MAX_PAUSE)
        return True

    def answered(self) -> None:
        """An answer came: the endpoint is back."""
        self.since, self.pause = None, FIRST_PAUSE
