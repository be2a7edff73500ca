"""One measurement counts once, within rounding (docs/protocol.md section 7): a payload whose
measured rows all lie within TOLERANCE of a stored submission's (same variants, rounds and batch
sizes) repeats that measurement, under whatever key it arrives. Exact copies are caught by the
unique `measured_sha256`; near copies are found through an index on the rows' shape and the means
of their log rates (every value within the tolerance implies both means within it), then compared
row by row. bench/near_copies.py measures the tolerance against honest repeat runs."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from typing import Any

from benchhub_protocol import envelope

from benchhub.results.models import Submission

# Every measured value (tg_tps and pp_tps) within 0.5% of its counterpart: rounding and re-encoding
# stay far inside it; two honest runs of one machine never come close (bench/near_copies.py).
TOLERANCE = 0.005
LOG_TOLERANCE = math.log1p(TOLERANCE)
MAX_CANDIDATES = 50

Rows = dict[tuple[str, int, int], tuple[float, float]]  # (variant, rep, batch size) -> (tg_tps, pp_tps)


def measured_rows(payload: dict[str, Any]) -> Rows:
    return {
        (run["variant"], run["rep"], row["batch_size"]): (row["tg_tps"], row["pp_tps"])
        for run in payload["sweep"]["runs"]
        for row in run["rows"]
    }


def _mean_log(values: list[float]) -> float | None:
    usable = [math.log(value) for value in values if math.isfinite(value) and value > 0]
    return statistics.fmean(usable) if len(usable) == len(values) and usable else None


def fingerprint(payload: dict[str, Any]) -> tuple[str, float | None, float | None]:
    """(shape digest, mean log tg_tps, mean log pp_tps): what the index narrows candidates by."""
    rows = measured_rows(payload)
    shape = hashlib.sha256(envelope.canonical_bytes(sorted(list(key) for key in rows))).hexdigest()
    return shape, _mean_log([tg for tg, _ in rows.values()]), _mean_log([pp for _, pp in rows.values()])


def values_of(rows: Rows) -> list[float]:
    """tg_tps, pp_tps of every row, rows in the order of their keys: what a near copy is compared by
    (the same shape means the same keys, so the same positions)."""
    return [value for key in sorted(rows) for value in rows[key]]


def measured_values(payload: dict[str, Any]) -> list[float]:
    return values_of(measured_rows(payload))


def close(a: float, b: float) -> bool:
    return a > 0 and b > 0 and abs(math.log(a / b)) <= LOG_TOLERANCE


def same_values(mine: Sequence[float], theirs: Sequence[float]) -> bool:
    return len(mine) == len(theirs) and all(close(a, b) for a, b in zip(mine, theirs, strict=True))


def same_measurement(mine: Rows, theirs: Rows) -> bool:
    return mine.keys() == theirs.keys() and same_values(values_of(mine), values_of(theirs))


def near_copy(payload: dict[str, Any]) -> Submission | None:
    """The stored submission this payload's measured rows repeat within TOLERANCE, if any: one query
    on the near-copy index, which brings each candidate's values (no join whose plan depends on the
    planner's statistics of the rows' tables)."""
    shape, tg, pp = fingerprint(payload)
    if tg is None or pp is None:
        return None
    candidates = (
        Submission.objects.filter(
            measured_shape=shape,
            measured_tg_log__range=(tg - LOG_TOLERANCE, tg + LOG_TOLERANCE),
            measured_pp_log__range=(pp - LOG_TOLERANCE, pp + LOG_TOLERANCE),
        )
        .order_by("received_at")
        .only("id", "measured_values")[:MAX_CANDIDATES]
    )
    mine = measured_values(payload)
    return next((found for found in candidates if same_values(mine, found.measured_values or ())), None)
