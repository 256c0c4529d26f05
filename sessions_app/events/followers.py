"""Which processes follow which sessions, kept in the channel layer's Redis: a process streaming a
run sends its events across only when another process follows the run's session (a tab there).

Each follower is a sorted-set member scored with Redis's own clock, so no host's clock decides
when an entry of a process that died without leaving is forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis

# A follower renews its entries this often; one not renewed for FORGET_AFTER is a process gone.
RENEW_EVERY = 120.0
FORGET_AFTER = 600

_ADD = """
local now = redis.call('TIME')[1]
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[1])
  redis.call('EXPIRE', key, ARGV[2])
end
"""
_PRUNE_AND_READ = """
local now = tonumber(redis.call('TIME')[1])
local found = {}
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - tonumber(ARGV[1]))
  found[i] = redis.call('ZRANGE', key, 0, -1)
end
return found
"""


def key(session_id: str) -> str:
    return f"parley:followers:{session_id}"


class Followers:
    """The registry in one Redis, through a client of one event loop's (as redis-py's are)."""

    def __init__(self, client: aioredis.Redis, worker_id: str) -> None:
        self.client = client
        self.worker_id = worker_id
        self._add = client.register_script(_ADD)
        self._read = client.register_script(_PRUNE_AND_READ)

    async def add(self, session_ids: Iterable[str]) -> None:
        """This process follows these sessions (again: their entries are renewed)."""
        keys = [key(s) for s in session_ids]
        if keys:
            await self._add(keys=keys, args=[self.worker_id, FORGET_AFTER])

    async def remove(self, session_id: str) -> None:
        await self.client.zrem(key(session_id), self.worker_id)

    async def remove_all(self, session_ids: Iterable[str]) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            for session_id in session_ids:
                pipe.zrem(key(session_id), self.worker_id)
            await pipe.execute()

    async def elsewhere(self, session_ids: list[str]) -> list[bool]:
        """For each session, whether a process other than this one follows it."""
        if not session_ids:
            return []
        found = await self._read(keys=[key(s) for s in session_ids], args=[FORGET_AFTER])
        mine = self.worker_id.encode()
        return [any(member != mine for member in members) for members in found]

    async def close(self) -> None:
        await self.client.aclose()


def for_layer(layer: Any, worker_id: str) -> Followers | None:
    """The registry in the Redis that carries `layer`; None for a layer that lends no Redis
    client (Parley's does, serving.layers; with another, every event is sent across)."""
    lend = getattr(layer, "redis_client", None)
    return None if lend is None else Followers(lend(), worker_id)
