"""CPU time of the processes under test, read from Linux's /proc: one process's, and a process
tree's, each process named by the part it plays (nginx, a daphne worker, a database backend).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

# CPU seconds each process has used so far, by pid, with the part it plays.
Snapshot = dict[int, tuple[str, float]]


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far; NaN once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy so far, summed over its cores: every
    process's, ours and anyone else's (the first line of /proc/stat, less idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def command_name(pid: int) -> str:
    """The process's executable name as the kernel keeps it (`nginx`, `python3.11`); "" once it
    is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (children, theirs, and so on), in the order found."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        children: list[int] = []
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                continue  # the thread or the process ended meanwhile
        found += children
        todo += children
    return found


def snapshot(parts: dict[int, str]) -> Snapshot:
    """The CPU seconds so far of each process named in `parts` (pid: part) that still runs."""
    taken = {pid: (part, cpu_seconds(pid)) for pid, part in parts.items()}
    return {pid: (part, cpu) for pid, (part, cpu) in taken.items() if not math.isnan(cpu)}


def used(before: Snapshot, after: Snapshot) -> dict[int, tuple[str, float]]:
    """CPU seconds each process used between two snapshots; one started since `before` counts
    from its start. One that ended meanwhile is lost with its time: a PostgreSQL backend of a
    connection closed mid-batch, say, which Django's persistent connections make rare."""
    return {
        pid: (part, cpu - before.get(pid, (part, 0.0))[1]) for pid, (part, cpu) in after.items()
    }
