"""Benchmarks: how fast Parley relays, stores and scales, against references in the same run.

`python -m bench` (or `make bench`) starts a scripted upstream, Parley and a naive Channels
baseline as real server processes on loopback, drives them with asyncio clients, and prints one
table of ratios. See `python -m bench --help` and docs/performance.md.
"""
