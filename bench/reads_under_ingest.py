"""Issue 6 target 3 under sustained ingest: the home page and the leaderboard API read while cell
refreshes keep changing the cells' version, with the board staleness bound at 0 (every changed
board rendered again) and at 5 s (results/readcache.py). Server time in process, DEBUG off, as
`bench reads`; each round refreshes one submission's cells (what the Celery task does after an
ingest), then reads each page `per_round` times. Blocks of rounds alternate the bounds A B B A.

    .venv/bin/python -m bench.reads_under_ingest --database postgres://postgres@127.0.0.1:5432/bh_perf_10k
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from bench import payloads
from bench.figures import percentile, report

BOUNDS = (0.0, 5.0)


class CountingCache:
    """The shared cache as readcache sees it, counting the renderings it keeps (one per render)."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.kept: dict[str, int] = {}

    def set(self, key: str, *args: Any, **kwargs: Any) -> Any:
        namespace = key.split(":", 1)[0]
        self.kept[namespace] = self.kept.get(namespace, 0) + 1
        return self.cache.set(key, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


def run(rounds: int, per_round: int) -> None:
    from django.core.cache import cache
    from django.test import Client
    from django.test.utils import override_settings

    from benchhub.results import cells, readcache
    from benchhub.results.models import LeaderboardCell, Submission

    client = Client()
    counting = CountingCache(cache)
    readcache.cache = counting  # type: ignore[assignment]  # counts renders; everything else goes through
    rng = random.Random(11)
    ids = [str(pk) for pk in Submission.objects.values_list("id", flat=True)[:5000]]
    reads: dict[str, Callable[[], Any]] = {
        "home page": lambda: client.get("/"),
        "leaderboard API": lambda: client.get("/api/v1/leaderboard/", {"campaign": payloads.CAMPAIGN}),
    }
    times: dict[tuple[float, str], list[float]] = {(bound, name): [] for bound in BOUNDS for name in reads}
    renders = {bound: {"home": 0, "leaderboard": 0} for bound in BOUNDS}
    refreshes = {bound: 0 for bound in BOUNDS}
    seconds = {bound: 0.0 for bound in BOUNDS}
    for get in reads.values():  # warm-up: imports, templates, the first renderings
        get()
    for bound in (*BOUNDS, *reversed(BOUNDS)):
        with override_settings(BENCHHUB_BOARD_MAX_STALENESS_SECONDS=bound):
            counting.kept = {}
            started = time.perf_counter()
            for _ in range(rounds):
                cells.refresh_submission_cells(rng.choice(ids))
                refreshes[bound] += 1
                for _ in range(per_round):
                    for name, get in reads.items():
                        began = time.perf_counter()
                        answer = get()
                        if answer.status_code != 200:
                            raise RuntimeError(f"{name} answered {answer.status_code}")
                        times[(bound, name)].append(1000 * (time.perf_counter() - began))
            seconds[bound] += time.perf_counter() - started
            for namespace, count in counting.kept.items():
                renders[bound][namespace] += count
    lines = [
        f"{Submission.objects.count()} stored submissions, {LeaderboardCell.objects.count()} cells; "
        f"blocks of {rounds} rounds (one submission's cells refreshed, then {per_round} reads of each page), "
        f"bounds {BOUNDS[0]:g} s, {BOUNDS[1]:g} s, {BOUNDS[1]:g} s, {BOUNDS[0]:g} s"
    ]
    for bound in BOUNDS:
        lines.append(
            f"bound {bound:g} s: {refreshes[bound]} refreshes in {seconds[bound]:.0f} s "
            f"({refreshes[bound] / seconds[bound]:.1f}/s); renders: home {renders[bound]['home']}, "
            f"leaderboard {renders[bound]['leaderboard']}"
        )
        for name in reads:
            found = times[(bound, name)]
            lines.append(
                f"  {name:16s} p50 {percentile(found, 0.5):7.1f} ms  p95 {percentile(found, 0.95):7.1f} ms  "
                f"max {max(found):7.1f} ms  (n={len(found)})"
            )
    report("reads under ingest (issue 6 target 3), server time in process, DEBUG off", lines)


def main() -> None:
    from bench.__main__ import DEFAULT_REDIS, HOST, _setup

    parser = argparse.ArgumentParser(prog="python -m bench.reads_under_ingest", description=__doc__)
    parser.add_argument("--database", default=f"{HOST}/bh_perf")
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--rounds", type=int, default=10, help="rounds per block")
    parser.add_argument("--per-round", type=int, default=5, help="reads of each page after each refresh")
    options = parser.parse_args()
    _setup(options.database, options.redis)
    run(options.rounds, options.per_round)


if __name__ == "__main__":
    main()
