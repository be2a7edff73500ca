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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Measured:
    """What a payload's measurement is known by: the exact rows' digest (the unique
    `measured_sha256`), and what the near-copy index narrows by and then compares."""

    sha256: str
    shape: str
    tg_log: float | None
    pp_log: float | None
    values: list[float]


def measured(payload: dict[str, Any]) -> Measured:
    rows = measured_rows(payload)
    return Measured(exact_digest(payload), *_fingerprint(rows), values_of(rows))


def exact_digest(payload: dict[str, Any]) -> str:
    """The fingerprint of a measurement: its (variant, rep, batch size, tg t/s, pp t/s) rows, in a
    fixed order, whatever the nonce, the key, the order of runs or the other fields say."""
    rows = sorted(
        [run["variant"], run["rep"], row["batch_size"], row["tg_tps"], row["pp_tps"]]
        for run in payload["sweep"]["runs"]
        for row in run["rows"]
    )
    return hashlib.sha256(envelope.canonical_bytes(rows)).hexdigest()


def fingerprint(payload: dict[str, Any]) -> tuple[str, float | None, float | None]:
    """(shape digest, mean log tg_tps, mean log pp_tps): what the index narrows candidates by."""
    return _fingerprint(measured_rows(payload))


def _fingerprint(rows: Rows) -> tuple[str, float | None, float | None]:
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


def near_copy(found: Measured) -> Submission | None:
    """The stored submission these measured rows repeat within TOLERANCE, if any: one query on the
    near-copy index, which brings each candidate's values (no join whose plan depends on the
    planner's statistics of the rows' tables)."""
    if found.tg_log is None or found.pp_log is None:
        return None
    candidates = (
        Submission.objects.filter(
            measured_shape=found.shape,
            measured_tg_log__range=(found.tg_log - LOG_TOLERANCE, found.tg_log + LOG_TOLERANCE),
            measured_pp_log__range=(found.pp_log - LOG_TOLERANCE, found.pp_log + LOG_TOLERANCE),
        )
        .order_by("received_at")
        .only("id", "measured_values")[:MAX_CANDIDATES]
    )
    return next((row for row in candidates if same_values(found.values, row.measured_values or ())), None)
