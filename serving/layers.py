"""The channel layer across processes: channels_redis, with a pool that waits for a connection."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio as aioredis
from channels_redis.core import RedisChannelLayer as _RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

# Connections one process keeps to Redis, and how long an operation waits for a free one.
POOL_SIZE = 100
POOL_TIMEOUT = 20.0
# Parley's own keys (events.followers): a batched read per moment and a write per join or leave.
OWN_POOL_SIZE = 10


def redis_layer(url: str) -> dict[str, Any]:
    """The CHANNEL_LAYERS entry for the Redis at `url`."""
    return {
        "BACKEND": "serving.layers.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 reads with a 5 s socket timeout, the same as channels_redis's
            # blocking pop: without a longer one, idle receives fail with TimeoutError.
            "hosts": [{"address": url, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "capacity": 1000,
            "expiry": 30,
        },
    }


def redis_problem(url: str, timeout: float = 5.0) -> str | None:
    """Why the Redis at `url` cannot carry the channel layer (it does not answer a PING within
    `timeout` seconds), for an operator to read; None when it answers."""
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout) as r:
            r.ping()
    except (redis.RedisError, OSError) as exc:
        parts = urlsplit(url)
        where = f"{parts.hostname}:{parts.port or 6379}" if parts.hostname else ""
        # A password may be in the user part or in the query (?password=): neither is shown.
        shown = parts._replace(netloc=where, query="", fragment="").geturl()
        return (
            f"REDIS_URL ({shown}) did not answer: {exc}. Start Redis there, or unset REDIS_URL "
            "to serve one process with the in-memory channel layer."
        )
    return None


class RedisChannelLayer(_RedisChannelLayer):
    """channels_redis's layer, drawing its connections from redis-py's blocking pool.

    The default pool raises MaxConnectionsError once 100 connections are in use. A process
    streaming answers into more sessions than that at once sends each event to its session's
    group, the sessions side by side, and a hundred sockets connecting at once join their
    groups together: past the hundredth, events would be lost and sockets closed with code 1011.
    The blocking pool has as many connections, and makes the rest wait for one.
    """

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        if "address" not in host:  # Sentinel: channels_redis's own pool
            return super().create_pool(index)
        host.setdefault("max_connections", POOL_SIZE)
        host.setdefault("timeout", POOL_TIMEOUT)
        return BlockingConnectionPool.from_url(host.pop("address"), **host)

    def redis_client(self) -> aioredis.Redis:
        """A client of the layer's (first) Redis for Parley's own keys (events.followers), with
        a small pool of its own, closed with it."""
        host = dict(self.hosts[0])
        if "address" not in host:  # Sentinel
            return aioredis.Redis.from_pool(super().create_pool(0))
        host.update(max_connections=OWN_POOL_SIZE, timeout=POOL_TIMEOUT)
        pool = BlockingConnectionPool.from_url(host.pop("address"), **host)
        return aioredis.Redis.from_pool(pool)
