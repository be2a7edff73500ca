"""CPU time by kind of process over a stretch of a run, read from /proc (Linux).

Live processes are read from /proc/<pid>/stat; processes this one started and already reaped (the
client pool of a round) from getrusage(RUSAGE_CHILDREN); the machine's busy time from /proc/stat,
so what no named process used (other work on the shared cores) is left over as "other".
A process that exits without being this one's child during the stretch takes its time with it.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

TICK = 1.0 / os.sysconf("SC_CLK_TCK")
KINDS = ("gunicorn", "celery", "postgres", "redis", "clients", "bench", "other")


def _kind(pid: str) -> str | None:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return None
    if b"gunicorn" in command:
        return "gunicorn"
    if b"celery" in command:
        return "celery"
    if command.startswith(b"postgres") or b"/postgres " in command:
        return "postgres"
    if b"redis-server" in command:
        return "redis"
    return None


def process_seconds(pid: str) -> float:
    """User and system CPU time of one live process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK  # utime, stime


def _busy_seconds() -> float:
    """The machine's non-idle CPU time: user, nice, system, irq, softirq, steal."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) * TICK


@dataclass(frozen=True)
class CpuSample:
    seconds: dict[str, float]
    wall: float

    @classmethod
    def now(cls) -> CpuSample:
        by_kind: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        own = str(os.getpid())
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or entry == own:
                continue
            kind = _kind(entry)
            if kind is None:
                continue
            try:
                by_kind[kind] += process_seconds(entry)
            except (OSError, IndexError, ValueError):
                continue  # it exited while being read
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        by_kind["clients"] = children.ru_utime + children.ru_stime
        by_kind["bench"] = time.process_time()
        by_kind["busy"] = _busy_seconds()
        return cls(dict(by_kind), time.perf_counter())

    def since(self, before: CpuSample) -> dict[str, float]:
        """Seconds of CPU each kind used between the two samples; "other" is the machine's rest."""
        used = {kind: self.seconds.get(kind, 0.0) - before.seconds.get(kind, 0.0) for kind in KINDS[:-1]}
        used["other"] = max(0.0, self.seconds["busy"] - before.seconds["busy"] - sum(used.values()))
        used["wall"] = self.wall - before.wall
        return used
