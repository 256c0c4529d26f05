"""The naive baseline: a Channels chat consumer written the way most tutorials write one.

Served by its own daphne process (`bench.naive.asgi`) and used only by the benchmark; the app is
installed only through `bench.naive.settings`, so Parley itself never sees it.
"""
