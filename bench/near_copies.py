"""`python -m bench.near_copies`: how often the near-copy rule (benchhub.results.copies) would refuse
an honest second run of the same machine, on the real A/A runs of ../shared/reference/ (an H200,
llama.cpp 0c1e570), which the rule was not tuned on.

Honest pairs: two submissions of the same machine built from disjoint processes of one A/A series
(rounds i and i+1 against rounds j and j+1, every pair of such blocks, A and B playing baseline and
variant), and the agent's two real back-to-back runs. A pair "collides" when every measured value
lies within the tolerance of its counterpart. Prints the collision rate, and how close the closest
pair came (its share of values within the tolerance)."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]


def raw_series(folder: Path, stem: str) -> list[dict[str, list[dict[str, Any]]]]:
    """Round r of an A/A series: {"A": rows, "B": rows}, in round order."""
    rounds = sorted({path.name.split("_")[-2] for path in folder.glob(f"{stem}_r*_A.jsonl")})
    return [{side: _rows(folder / f"{stem}_{name}_{side}.jsonl") for side in "AB"} for name in rounds]


def as_rows(rounds: list[dict[str, list[dict[str, Any]]]]) -> dict[tuple[str, int, int], tuple[float, float]]:
    return {
        (side, rep, row["pl"]): (row["speed_tg"], row["speed_pp"])
        for rep, by_side in enumerate(rounds, start=1)
        for side, rows in by_side.items()
        for row in rows
    }


def payload_rows(path: Path) -> dict[tuple[str, int, int], tuple[float, float]]:
    from benchhub.results import copies

    return copies.measured_rows(json.loads(path.read_text()))


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    import django

    django.setup()
    from benchhub.results import copies

    if not REFERENCE.is_dir():
        print(f"no reference runs at {REFERENCE}", file=sys.stderr)
        return 2
    pairs: list[tuple[str, Any, Any]] = []
    raw = REFERENCE / "aa-h200-0c1e570" / "raw"
    for stem in ("tg64", "tg256", "tg384", "tg1024c16k"):
        series = raw_series(raw, stem)
        blocks = [series[start : start + 2] for start in range(0, len(series) - 1, 2)]
        for first, second in itertools.combinations(blocks, 2):
            pairs.append((stem, as_rows(first), as_rows(second)))
    agent = REFERENCE / "aa-agent-h200-0c1e570"
    pairs.append(
        ("agent run1/run2", payload_rows(agent / "run1-payload.json"), payload_rows(agent / "run2-payload.json"))
    )
    collisions = 0
    closest = 0.0
    values = within = 0
    for _, mine, theirs in pairs:
        collisions += copies.same_measurement(mine, theirs)
        shared = mine.keys() & theirs.keys()
        close = sum(
            copies.close(mine[key][0], theirs[key][0]) + copies.close(mine[key][1], theirs[key][1]) for key in shared
        )
        values += 2 * len(shared)
        within += close
        closest = max(closest, close / max(2 * len(shared), 1))
    print(f"tolerance: every tg_tps and pp_tps within {copies.TOLERANCE:.1%}")
    print(f"honest pairs: {len(pairs)} (A/A series tg64, tg256, tg384, tg1024 in 2-round blocks; the agent's 2 runs)")
    print(f"refused as copies: {collisions} of {len(pairs)}")
    print(f"values within the tolerance by chance: {within / values:.1%} of {values}")
    print(f"closest pair: {closest:.1%} of its values within the tolerance (a copy needs 100%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
