#!/usr/bin/env python3
"""Recompute every benchhub leaderboard cell from the public snapshot, and compare with the live API.

Standalone on purpose: the Python standard library and PyNaCl, nothing from benchhub, so that anyone
can check the leaderboard with one file they can read, without installing or trusting the code it
checks. That is why it carries its own copy of the rules (the verdict words, the statistics of
docs/protocol.md section 7), the one copy outside benchhub_protocol: tests/recompute/test_rules.py and
tests/protocol/test_validity_recompute.py hold it equal to the shared package, constant for constant
and cell for cell. It
  1. reads the snapshot (GET /api/v1/snapshot/, checked against its stated SHA-256, or a saved .jsonl.gz file),
  2. verifies every submission envelope (DSSE over Ed25519) against its contributor's listed keys,
  3. recomputes every cell by docs/protocol.md section 7 (cells version 4), judging each submission by
     the campaign version it ran under (campaign versions),
  4. with --server, prints every cell field that differs from GET /api/v1/leaderboard/?campaign=<slug>.

    python scripts/recompute_cells.py --server https://benchhub.example
    python scripts/recompute_cells.py --snapshot snapshot.jsonl.gz [--server URL] [--json]

Exit status: 0 every cell agrees, 1 some differ, 2 bad input or a signature that does not verify,
3 the server could not be read, 4 PyNaCl is missing (pip install pynacl).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import gzip
import hashlib
import io
import itertools
import json
import math
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TextIO

try:
    import nacl.exceptions
    import nacl.signing
except ImportError as missing:  # main() says so in one sentence (exit 4); --help still works
    MISSING_DEPENDENCY = f"{missing}"
else:
    MISSING_DEPENDENCY = ""

SUBMISSION_TYPE = "application/vnd.benchhub.submission.v1+json"
WITHDRAWAL_TYPE = "application/vnd.benchhub.withdrawal.v1+json"
CELLS_VERSION = 4
# Why a row is left out of its cell: the first that applies, in this order (docs/protocol.md section 7).
REASONS = (
    "hidden",
    "withdrawn",
    "held",
    "correctness_failed",
    "correctness_not_run",
    "degenerate_output",
    "run_state",
)
STATES = ("counted", "hidden", "held", "withdrawn")
HELD_REASONS = ("quarantined", "model_conflict")  # the server's decisions that hold a submission
COMPARED_SETTINGS = ("npp", "ntg", "n_ctx", "flash_attn", "n_gpu_layers")
RUN_STATE_FLAGS = ("on_battery", "low_power_mode", "thermal_pressure")
KEY_FIELDS = ("chip", "gpu_cores", "model_sha256", "backend", "variant", "commit", "batch_size", "campaign_version")
FLOAT_FIELDS = (
    "baseline_tg_tps",
    "tg_tps",
    "speedup",
    "ci_low",
    "ci_high",
    "predict_low",
    "predict_high",
    "predict_level",
    "tau",
    "i2",
    "min_effect",
)
EXACT_FIELDS = (
    "model",
    "quant",
    "interval",
    "verdict",
    "n_machines",
    "n_submissions",
    "n_contributors",
    "n_pending",
    "excluded",
    "control",
    "superseded",
)
REL_TOL = 1e-9

# campaign, chip, gpu_cores, model sha256, backend, campaign version (of its cells): one page, whose
# verdicts are controlled together
PageId = tuple[str, str, "int | None", str, str, int]
Row = dict[str, Any]


class BadInput(Exception):
    """A snapshot that cannot be read, or an envelope that does not verify (exit 2)."""


class Unreachable(Exception):
    """The server did not answer with what was asked for (exit 3)."""


# ================================================================ statistics
# This section stands alone (in: one page's included rows per (variant, commit, batch size); out:
# each cell's numbers and each (variant, commit)'s headline): it can be replaced whole.
# Cells version 4 (docs/method.md): the same numbers as benchhub_protocol.stats.page_stats, written
# again here so that this script needs nothing from benchhub. A submission's estimate is the median
# of its whole rotation cycles' ratios, with a standard error from the cycles; a machine (a key)
# combines its submissions weighted by their cycles; a cell combines machines as a random-effects
# meta-analysis: variances moderated towards the typical machine's, DerSimonian-Laird tau^2,
# Hartung-Knapp intervals Bonferroni-adjusted over every interval of the page, a prediction for one
# more machine running the campaign's stated cycles, and verdicts from all of these.

VERDICTS = ("faster", "slower", "varies by machine", "within", "unclear", "too few machines")
CONFIDENCE = 0.95
INTERVAL_LABEL = "95%, page-wise"
PREDICT_LEVEL = 0.8
PREDICT_CYCLES = 3
MIN_MACHINES = 3
EFFECT_FLOOR = 0.001
CLEAR_SHARE = 0.5
PRIOR_DF = 4
MIN_CYCLE_SD = 0.001
EMPIRICAL_FROM = 20
MIXTURE_POINTS = 200
MEDIAN_VARIANCE_FACTOR = math.pi / 2
PageKey = tuple[str, str, int]  # variant, commit, batch size
# speedup, interval, ci_low, ci_high, predict_low, predict_high, predict_level, tau, i2, verdict
Judged = tuple[
    float | None, str | None, float | None, float | None, float | None, float | None, float | None,
    float | None, float | None, str,
]  # fmt: skip


def median(values: Sequence[float]) -> float:
    """The middle value; for an even count, the mean of the two middle values."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for numerator in (even, odd):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def _beta_regularized(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_quantile(p: float, df: int) -> float:
    """The p-quantile (p > 0.5) of Student's t, by bisection on its upper tail."""
    tail = 1.0 - p
    low, high = 0.0, 1.0
    while 0.5 * _beta_regularized(df / 2.0, 0.5, df / (df + high * high)) > tail:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if 0.5 * _beta_regularized(df / 2.0, 0.5, df / (df + middle * middle)) > tail:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def normal_quantile(p: float) -> float:
    """The p-quantile (p > 0.5) of the standard normal, by bisection on erfc."""
    low, high = 0.0, 40.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if 0.5 * math.erfc(middle / math.sqrt(2.0)) > 1.0 - p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def chi2_upper_tail(x: float, df: int) -> float:
    """P(X > x), X chi-squared with df degrees of freedom: Q(df/2, x/2), series below a + 1, else a
    continued fraction."""
    a, z = df / 2.0, x / 2.0
    if z <= 0.0:
        return 1.0
    front = math.exp(a * math.log(z) - z - math.lgamma(a))
    if z < a + 1.0:
        term = total = 1.0 / a
        for n in range(1, 1000):
            term *= z / (a + n)
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - front * total)
    tiny = 1e-300
    b = z + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    result = d
    for n in range(1, 1000):
        an = -n * (n - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        result *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return front * result


def information(n_cycles: int) -> float:
    """What a median of n_cycles cycle ratios is worth in cycles."""
    return n_cycles / (MEDIAN_VARIANCE_FACTOR if n_cycles >= 3 else 1.0)


class Measured(NamedTuple):
    """One included submission's numbers in one cell: its estimate over whole cycles."""

    machine: Any  # the signing key
    contributor: Any  # the handle
    speedup: float
    baseline_tg_tps: float
    log_se: float
    df: int
    n_cycles: int


class Machine(NamedTuple):
    log_ratio: float
    information: float
    df: int
    cycle_variance: float


@dataclass(frozen=True)
class CellStats:
    baseline_tg_tps: float | None
    tg_tps: float | None
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    tau: float | None
    i2: float | None
    verdict: str
    n_machines: int
    n_submissions: int
    n_contributors: int


@dataclass(frozen=True)
class HeadlineStats:
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    tau: float | None
    i2: float | None
    verdict: str
    n_machines: int


@dataclass(frozen=True)
class PageStats:
    cells: dict[PageKey, CellStats]
    headlines: dict[tuple[str, str], HeadlineStats]


def _usable(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _geometric_mean(values: Sequence[float]) -> float:
    """Taken around the values' median, so that equal values give exactly that value back."""
    if len(values) == 1:
        return values[0]
    centre = median(values)
    return centre * math.exp(math.fsum(math.log(value / centre) for value in values) / len(values))


def _machine(rows: Sequence[Measured]) -> Machine:
    """A machine's submissions weighted by their cycles, their per-cycle variances pooled."""
    if len(rows) == 1:
        weight = information(rows[0].n_cycles)
        variance = max(rows[0].log_se ** 2 * weight, MIN_CYCLE_SD**2)
        return Machine(math.log(rows[0].speedup), weight, rows[0].df, variance)
    weights = [information(row.n_cycles) for row in rows]
    total = math.fsum(weights)
    centre = math.fsum(w * math.log(row.speedup) for w, row in zip(weights, rows, strict=False)) / total
    df = sum(row.df for row in rows)
    variances = [max(row.log_se**2 * w, MIN_CYCLE_SD**2) for w, row in zip(weights, rows, strict=False)]
    pooled = math.fsum(row.df * v for row, v in zip(rows, variances, strict=False)) / df if df > 0 else max(variances)
    return Machine(centre, total, df, max(pooled, MIN_CYCLE_SD**2))


def _mean_of_machines(values: Sequence[Machine]) -> Machine:
    sd = math.fsum(math.sqrt(value.cycle_variance) for value in values) / len(values)
    return Machine(
        math.fsum(value.log_ratio for value in values) / len(values),
        min(value.information for value in values),
        min(value.df for value in values),
        sd * sd,
    )


def _pool(machines: Sequence[Machine]) -> tuple[float, float, float, float, float, float, list[float]]:
    """(mean, Hartung-Knapp se, tau^2, I^2, Cochran's Q, the typical per-cycle variance, each
    machine's deviation from the mean)."""
    k = len(machines)
    centre = median([found.log_ratio for found in machines])
    ys = [found.log_ratio - centre for found in machines]
    typical = median([found.cycle_variance for found in machines])
    variances = [
        (PRIOR_DF * typical + found.df * found.cycle_variance) / (PRIOR_DF + found.df) / found.information
        for found in machines
    ]
    weights = [1.0 / v for v in variances]
    total = math.fsum(weights)
    fixed = math.fsum(w * y for w, y in zip(weights, ys, strict=False)) / total
    q = math.fsum(w * (y - fixed) ** 2 for w, y in zip(weights, ys, strict=False))
    c = total - math.fsum(w * w for w in weights) / total
    tau2 = max(0.0, (q - (k - 1)) / c) if k > 1 and c > 0 else 0.0
    i2 = max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0
    star = [1.0 / (v + tau2) for v in variances]
    total_star = math.fsum(star)
    offset = math.fsum(w * y for w, y in zip(star, ys, strict=False)) / total_star
    spread = math.fsum(w * (y - offset) ** 2 for w, y in zip(star, ys, strict=False)) / (k - 1) if k > 1 else 0.0
    deviations = [y - offset for y in ys]
    return centre + offset, math.sqrt(max(spread, 1.0) / total_star), tau2, i2, q, typical, deviations


def _mixture_bounds(mean: float, tau: float, deviations: Sequence[float], noise: float) -> tuple[float, float]:
    """The machines' deviations scaled to spread by tau, each blurred by a new machine's noise: the
    PREDICT_LEVEL range of that mixture."""
    spread = math.sqrt(math.fsum(d * d for d in deviations) / len(deviations))
    scale = tau / spread if spread > 0 else 0.0
    ordered = sorted(deviations)
    if len(ordered) > MIXTURE_POINTS:
        ordered = [ordered[int((i + 0.5) * len(ordered) / MIXTURE_POINTS)] for i in range(MIXTURE_POINTS)]
    centres = [mean + scale * d for d in ordered]
    sd = math.sqrt(noise)

    def cdf(x: float) -> float:
        return math.fsum(0.5 * math.erfc((c - x) / (sd * math.sqrt(2.0))) for c in centres) / len(centres)

    def quantile(p: float) -> float:
        low, high = min(centres) - 40 * sd, max(centres) + 40 * sd
        for _ in range(60):
            middle = (low + high) / 2
            if cdf(middle) < p:
                low = middle
            else:
                high = middle
        return (low + high) / 2

    return math.exp(quantile(0.5 - PREDICT_LEVEL / 2)), math.exp(quantile(0.5 + PREDICT_LEVEL / 2))


def decide(
    speedup: float, low: float, high: float, min_effect: float, predict: tuple[float, float], varies: bool
) -> str:
    threshold = max(min_effect, EFFECT_FLOOR)
    if varies:
        return "varies by machine"
    clear = threshold * CLEAR_SHARE
    if low > 1.0 + clear and speedup >= 1.0 + threshold and predict[0] >= 1.0 - threshold:
        return "faster"
    if high < 1.0 - clear and speedup <= 1.0 - threshold and predict[1] <= 1.0 + threshold:
        return "slower"
    if all(1.0 - threshold <= bound <= 1.0 + threshold for bound in (low, high, *predict)):
        return "within"
    return "unclear"


def _judge(machines: Sequence[Machine], n_tests: int, min_effect: float, cycles: int) -> Judged:
    if not machines:
        return (None, None, None, None, None, None, None, None, None, "too few machines")
    mean, se, tau2, i2, q, typical, deviations = _pool(machines)
    speedup = math.exp(mean)
    k = len(machines)
    if k < MIN_MACHINES:
        return (speedup, None, None, None, None, None, None, None, None, "too few machines")
    half = t_quantile(0.5 + (1.0 - (1.0 - CONFIDENCE) / n_tests) / 2, k - 1) * se
    low, high = math.exp(mean - half), math.exp(mean + half)
    noise = typical / information(cycles) + se**2
    if k >= EMPIRICAL_FROM and tau2 > 0:
        predict = _mixture_bounds(mean, math.sqrt(tau2), deviations, noise)
    else:
        spread = normal_quantile(0.5 + PREDICT_LEVEL / 2) * math.sqrt(tau2 + noise)
        predict = math.exp(mean - spread), math.exp(mean + spread)
    threshold = max(min_effect, EFFECT_FLOOR)
    reach = normal_quantile(0.5 + PREDICT_LEVEL / 2) * math.sqrt(tau2)
    varies = (
        math.exp(mean - reach) < 1.0 - threshold
        and math.exp(mean + reach) > 1.0 + threshold
        and chi2_upper_tail(q, k - 1) < (1.0 - CONFIDENCE) / n_tests
    )
    verdict = decide(speedup, low, high, min_effect, predict, varies)
    return (speedup, INTERVAL_LABEL, low, high, *predict, PREDICT_LEVEL, math.sqrt(tau2), i2, verdict)


def page_stats(
    cells: Mapping[PageKey, Iterable[Measured]],
    *,
    headline_sizes: Sequence[int],
    min_effect: float,
    predict_cycles: int = PREDICT_CYCLES,
) -> PageStats:
    """Every cell of one page (campaign, chip, GPU cores, model file, backend; not the baseline's)
    and each (variant, commit)'s headline: per machine the mean over headline_sizes of its logs,
    machines missing one left out. One Bonferroni family: all that have an interval."""
    values: dict[PageKey, dict[Any, Machine]] = {}
    baselines: dict[PageKey, list[float]] = {}
    counts: dict[PageKey, tuple[int, int]] = {}
    for key, rows in cells.items():
        by_machine: dict[Any, list[Measured]] = defaultdict(list)
        for row in rows:
            if _usable(row.speedup) and _usable(row.baseline_tg_tps) and math.isfinite(row.log_se) and row.log_se >= 0:
                by_machine[row.machine].append(row)
        values[key] = {machine: _machine(found) for machine, found in by_machine.items()}
        baselines[key] = [_geometric_mean([row.baseline_tg_tps for row in found]) for found in by_machine.values()]
        handles = {row.contributor for found in by_machine.values() for row in found}
        counts[key] = (sum(len(found) for found in by_machine.values()), len(handles))
    headline_values: dict[tuple[str, str], list[Machine]] = {}
    for variant, commit in sorted({(variant, commit) for variant, commit, _ in cells}):
        by_size = [values.get((variant, commit, size), {}) for size in headline_sizes]
        complete = set.intersection(*(set(found) for found in by_size)) if by_size else set()
        headline_values[(variant, commit)] = [
            _mean_of_machines([found[machine] for found in by_size]) for machine in sorted(complete, key=repr)
        ]
    families = [*(list(found.values()) for found in values.values()), *headline_values.values()]
    n_tests = max(1, sum(1 for machines in families if len(machines) >= MIN_MACHINES))
    out_cells = {}
    for key, found in values.items():
        judged = _judge(list(found.values()), n_tests, min_effect, predict_cycles)
        baseline = _geometric_mean(baselines[key]) if found else None
        tg_tps = None if baseline is None or judged[0] is None else baseline * judged[0]
        out_cells[key] = CellStats(baseline, tg_tps, *judged, len(found), *counts[key])
    out_headlines = {
        pair: HeadlineStats(*_judge(machines, n_tests, min_effect, predict_cycles), len(machines))
        for pair, machines in headline_values.items()
    }
    return PageStats(out_cells, out_headlines)


# ================================================================ end of statistics


# ---------------------------------------------------------------- envelopes (docs/protocol.md 1-2)


def strict_b64(text: object) -> bytes:
    """Standard base64 with its padding and no stray bits (the only spelling the service stores)."""
    try:
        raw = base64.b64decode(str(text).encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raw = None
    if not isinstance(text, str) or raw is None or base64.b64encode(raw).decode("ascii") != text:
        raise BadInput("a field is not canonical standard base64")
    return raw


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(body), body)


def keyid_of(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise BadInput("the payload repeats a key")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise BadInput(f"the payload holds {name}, which is not JSON")


def verify_envelope(envelope_text: str, keys: Mapping[str, bytes], kind: str = SUBMISSION_TYPE) -> dict[str, Any]:
    """The payload of an envelope of type `kind`, once every signature by one of `keys` (keyid ->
    public key) verifies over the exact payload bytes, and at least one does."""
    try:
        envelope = json.loads(envelope_text)
    except json.JSONDecodeError:
        raise BadInput("the envelope is not JSON") from None
    if not isinstance(envelope, dict) or envelope.get("payloadType") != kind:
        raise BadInput(f"not an envelope of type {kind}")
    body = strict_b64(envelope.get("payload"))
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not all(isinstance(s, dict) for s in signatures):
        raise BadInput("the envelope's signatures are not a list of objects")
    ours = [s for s in signatures if s.get("keyid") in keys]
    if not ours:
        raise BadInput("no signature by a key of its contributor")
    for signature in ours:
        verify_key = nacl.signing.VerifyKey(keys[signature["keyid"]])
        try:
            verify_key.verify(pae(kind, body), strict_b64(signature.get("sig")))
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError):
            raise BadInput(f"the signature by key {signature['keyid'][:16]}... does not verify") from None
    try:
        text = body.decode("utf-8")
        payload = json.loads(text, parse_constant=_no_constant)
        if json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() != body:
            # Not plain canonical JSON (RFC 8785 writes a few numbers and key orders unlike Python):
            # at least make sure no key is repeated, which parsers resolve differently.
            payload = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadInput("the signed payload is not UTF-8 JSON") from None
    if not isinstance(payload, dict):
        raise BadInput("the signed payload is not a JSON object")
    return payload


# ---------------------------------------------------------------- the snapshot (docs/recompute.md)


@dataclass
class Submission:
    id: str
    contributor: str
    keyid: str  # the key that signed it: a machine is a key
    received_at: datetime
    state: str  # counted | hidden | held | withdrawn
    payload: dict[str, Any]


@dataclass(frozen=True)
class Rules:
    """What the service reads of a campaign to judge its cells (the snapshot's `rules`)."""

    min_effect: float
    patched_backends: frozenset[str]
    headline_sizes: tuple[int, ...]
    predict_cycles: int = PREDICT_CYCLES


@dataclass(frozen=True)
class Version:
    """One published campaign version, as the snapshot lists it."""

    number: int
    digest: str
    published_at: datetime | None
    manifest: dict[str, Any]
    rules: Rules
    cells: int = 0  # the version its cells are numbered by (measured_from)


@dataclass
class Snapshot:
    generated_at: datetime
    key_probation_s: int
    campaigns: dict[str, dict[str, Any]] = field(default_factory=dict)  # slug -> manifest
    versions: dict[str, list[Version]] = field(default_factory=dict)  # slug -> its published versions, oldest first
    keys: dict[str, dict[str, bytes]] = field(default_factory=dict)  # handle -> keyid -> public key
    registered: dict[str, datetime] = field(default_factory=dict)  # keyid -> when it was registered
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # model sha256 -> (name, quant) a rule decides
    submissions: Iterator[Submission] = field(default_factory=lambda: iter(()))  # verified as read, oldest first
    failures: list[str] = field(default_factory=list)  # what did not verify, one line each (complete once read)

    def pending(self, keyid: str) -> bool:
        """Whether the key was still on probation when the snapshot was written (docs/protocol.md section 7)."""
        if self.key_probation_s <= 0:
            return False
        return self.registered[keyid] > self.generated_at - timedelta(seconds=self.key_probation_s)


def timestamp(text: object) -> datetime:
    if not isinstance(text, str):
        raise BadInput(f"{text!r} is not a time")
    try:
        found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"{text!r} is not an ISO 8601 time") from None
    if found.tzinfo is None:
        raise BadInput(f"{text!r} has no time zone")
    return found


def snapshot_lines(data: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of a gzipped (or plain) JSON-lines file, one at a time."""
    stream: gzip.GzipFile | io.BytesIO = io.BytesIO(data)
    if data[:2] == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=stream)
    try:
        for raw in stream:
            if raw.strip():
                line = json.loads(raw)
                if not isinstance(line, dict):
                    raise BadInput("a snapshot line is not a JSON object")
                yield line
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"the snapshot is not gzipped JSON lines: {exc}") from None


def parse_snapshot(data: bytes) -> Snapshot:
    """The header, campaigns and contributors at once; the submissions lazily (one payload in memory
    at a time), each verified, those that fail listed in `failures` rather than yielded."""
    lines = snapshot_lines(data)
    header = next(lines, {})
    if header.get("kind") != "snapshot" or header.get("cells_version") != CELLS_VERSION:
        raise BadInput(f"the first line must be the snapshot header with cells_version {CELLS_VERSION}")
    probation = header.get("key_probation_s")
    if not isinstance(probation, int) or isinstance(probation, bool):
        raise BadInput("the snapshot header has no integer key_probation_s")
    snapshot = Snapshot(timestamp(header.get("generated_at")), probation)
    for line in lines:
        if line.get("kind") == "campaign":
            slug = line["manifest"]["slug"]
            snapshot.campaigns[slug] = line["manifest"]
            snapshot.versions[slug] = campaign_versions(line)
        elif line.get("kind") == "contributor":
            snapshot.keys[line["handle"]] = contributor_keys(line, snapshot)
        elif line.get("kind") == "model_name":
            if not all(isinstance(line.get(name), str) for name in ("sha256", "name", "quant")):
                raise BadInput("a model_name line needs the strings sha256, name and quant")
            snapshot.names[line["sha256"]] = (line["name"], line["quant"])
        else:
            snapshot.submissions = verified_submissions(itertools.chain([line], lines), snapshot)
            break
    return snapshot


def campaign_versions(line: Mapping[str, Any]) -> list[Version]:
    """The published (signed) versions of a campaign line, each with the version its cells are numbered
    by: the earliest since which nothing measured (commits, patches, env, sweep) changed. A snapshot
    without versions (before cells version 4) is its manifest as version 1."""
    listed = line.get("versions") or [{**line, "version": 1, "digest": "", "signature": "-", "published_at": None}]
    found: list[Version] = []
    for entry in listed:
        if not entry.get("signature"):
            continue  # a draft: nothing runs under it
        published = timestamp(entry["published_at"]) if entry.get("published_at") else None
        number, manifest = int(entry["version"]), entry["manifest"]
        same = found and measured(found[-1].manifest) == measured(manifest)
        cells = found[-1].cells if same else number
        found.append(Version(number, entry["digest"], published, manifest, campaign_rules(entry["rules"]), cells))
    return found


def measured(manifest: Mapping[str, Any]) -> Any:
    """What a version makes a machine measure; a version that changes it supersedes the older cells."""
    variants = [
        (v["name"], v.get("commit"), [(p["name"], p["sha256"]) for p in v.get("patches", [])], v.get("env", {}))
        for v in manifest["variants"]
    ]
    return (manifest["repo"], manifest["baseline"], variants, manifest["sweep"])


def version_of(payload: Mapping[str, Any], versions: Sequence[Version]) -> Version:
    """The version a submission is judged by: the one its campaign_digest names, else the newest
    published at or before its created_at (else the first)."""
    named = payload.get("campaign_digest")
    if named is not None:
        for version in versions:
            if version.digest == named:
                return version
        raise BadInput(f"its campaign_digest {str(named)[:16]}... is no published version of {payload['campaign']}")
    if not versions:
        raise BadInput(f"campaign {payload['campaign']} has no published version")
    created = timestamp(payload["created_at"])
    opened = [v for v in versions if v.published_at is None or v.published_at <= created]
    return opened[-1] if opened else versions[0]


def campaign_rules(rules: Mapping[str, Any]) -> Rules:
    return Rules(
        float(rules["min_effect"]),
        frozenset(rules["patched_backends"]),
        tuple(int(s) for s in rules["headline_sizes"]),
        int(rules.get("predict_cycles", PREDICT_CYCLES)),
    )


def contributor_keys(line: Mapping[str, Any], snapshot: Snapshot) -> dict[str, bytes]:
    """keyid -> public key, keeping only keys whose keyid is the SHA-256 of the key."""
    keys = {}
    for entry in line["keys"]:
        public_key = strict_b64(entry["public_key"])
        if len(public_key) != 32 or keyid_of(public_key) != entry["keyid"]:
            snapshot.failures.append(
                f"contributor {line['handle']}: keyid {entry['keyid'][:16]}... is not its key's SHA-256"
            )
            continue
        keys[entry["keyid"]] = public_key
        snapshot.registered[entry["keyid"]] = timestamp(entry["registered_at"])
    return keys


def verified_submissions(lines: Iterable[dict[str, Any]], snapshot: Snapshot) -> Iterator[Submission]:
    for line in lines:
        if line.get("kind") != "submission":
            order = "campaigns, contributors, model names, then submissions"
            raise BadInput(f"unexpected line kind {line.get('kind')!r} ({order})")
        if line.get("state") not in STATES:
            raise BadInput(f"submission {line.get('id')}: unknown state {line.get('state')!r}")
        if line["state"] == "held" and not set(line.get("held") or ()) & set(HELD_REASONS):
            raise BadInput(f"submission {line.get('id')}: held without one of {', '.join(HELD_REASONS)}")
        keys = snapshot.keys.get(line["contributor"], {})
        try:
            payload = verify_envelope(line["envelope"], keys)
            signers = [s["keyid"] for s in json.loads(line["envelope"])["signatures"] if s.get("keyid") in keys]
            if len(signers) != 1:
                raise BadInput("a submission is signed by exactly one key of its contributor")
            if payload.get("campaign") not in snapshot.campaigns:
                raise BadInput(f"its campaign {payload.get('campaign')!r} is not in the snapshot")
            version_of(payload, snapshot.versions[payload["campaign"]])
            if line.get("withdrawal") is not None or line["state"] == "withdrawn":
                verify_withdrawal(line, keys)
        except BadInput as exc:
            snapshot.failures.append(f"submission {line.get('id')} by {line.get('contributor')}: {exc}")
            continue
        received = timestamp(line["received_at"])
        yield Submission(line["id"], line["contributor"], signers[0], received, line["state"], payload)


def verify_withdrawal(line: Mapping[str, Any], keys: Mapping[str, bytes]) -> None:
    """A withdrawn submission carries its withdrawal, signed by the key that signed the submission."""
    if not isinstance(line.get("withdrawal"), str):
        raise BadInput("withdrawn without a signed withdrawal")
    signers = {signature.get("keyid") for signature in json.loads(line["envelope"])["signatures"]}
    payload = verify_envelope(line["withdrawal"], {k: v for k, v in keys.items() if k in signers}, WITHDRAWAL_TYPE)
    if payload.get("submission") != line["id"]:
        raise BadInput("its withdrawal names another submission")


# ---------------------------------------------------------------- per submission (cells-v3 rules)


def sweep_differs(sweep: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    if any(name in wanted and sweep.get(name) != wanted[name] for name in COMPARED_SETTINGS):
        return True
    if sorted(sweep.get("extra_args") or []) != sorted(wanted.get("extra_args") or []):
        return True
    return not set(sweep["batch_sizes"]) <= set(wanted.get("batch_sizes", sweep["batch_sizes"]))


def env_differs(payload: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    envs = {variant["name"]: variant.get("env", {}) for variant in manifest["variants"]}
    return any(variant.get("env", {}) != envs.get(variant["name"]) for variant in payload["variants"])


def too_few_rounds(payload: Mapping[str, Any]) -> bool:
    return len({run["rep"] for run in payload["sweep"]["runs"]}) < 2


def nonstandard(payload: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Measured something else than its campaign asks: left out of every cell, counted nowhere."""
    sweep = payload["sweep"]
    return sweep_differs(sweep, manifest["sweep"]) or env_differs(payload, manifest) or too_few_rounds(payload)


def run_positions(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], int]:
    """Each run's position in its round (0 = first), by `seq`."""
    by_round: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for run in runs:
        by_round[run["rep"]].append(run)
    return {
        (run["variant"], rep): index
        for rep, members in by_round.items()
        for index, run in enumerate(sorted(members, key=lambda member: member["seq"]))
    }


def whole_cycles(runs: Sequence[Mapping[str, Any]]) -> list[tuple[int, ...]]:
    """The reps of each whole cycle: consecutive blocks of k rounds (k variants) in which every
    variant ran once in every position (by `seq` within the round); other blocks are left out."""
    variants = {run["variant"] for run in runs}
    k = len(variants)
    if k < 2:
        return []
    positions = run_positions(runs)
    reps = sorted({run["rep"] for run in runs})
    found = []
    for start in range(0, len(reps) - k + 1, k):
        block = tuple(reps[start : start + k])
        complete = all((variant, rep) in positions for variant in variants for rep in block)
        seen = {(variant, positions.get((variant, rep))) for variant in variants for rep in block}
        if complete and seen == {(variant, position) for variant in variants for position in range(k)}:
            found.append(block)
    return found


def one_cycle_spread(runs: Sequence[Mapping[str, Any]], batch: int) -> float | None:
    """The per-process SD of log speed at one batch size over one whole cycle (a k x k Latin square of
    rounds, positions and variants), after round, variant and position effects, with (k-1)(k-2)
    degrees of freedom; None below one degree of freedom (two variants) or without every run's row."""
    positions = run_positions(runs)
    logs = {
        (run["variant"], run["rep"]): math.log(row["tg_tps"])
        for run in runs
        for row in run["rows"]
        if row["batch_size"] == batch and row["tg_tps"] > 0
    }
    names = sorted({run["variant"] for run in runs})
    reps = sorted({run["rep"] for run in runs if all((name, run["rep"]) in logs for name in names)})
    k = len(names)
    df = len(reps) * k - len(reps) - 2 * (k - 1)
    if len(reps) != k or df < 1:
        return None
    cells = [(name, rep) for name in names for rep in reps]
    grand = math.fsum(logs[cell] for cell in cells) / len(cells)
    by_round = {rep: math.fsum(logs[name, rep] for name in names) / k for rep in reps}
    by_variant = {name: math.fsum(logs[name, rep] for rep in reps) / k for name in names}
    by_position: dict[int, list[float]] = defaultdict(list)
    for cell in cells:
        by_position[positions[cell]].append(logs[cell])
    position_mean = {position: math.fsum(values) / len(values) for position, values in by_position.items()}
    residuals = [
        logs[name, rep] - by_round[rep] - by_variant[name] - position_mean[positions[name, rep]] + 2 * grand
        for name, rep in cells
    ]
    return math.sqrt(math.fsum(value * value for value in residuals) / df)


def _stdev(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1))


def paired_rows(
    payload: Mapping[str, Any], baseline: str
) -> dict[tuple[str, int], tuple[float, float, float, int, int]]:
    """(variant, batch size) -> (ratio, baseline tg_tps, log_se, df, n_cycles): the ratio the median
    of the whole cycles' ratios (each the geometric mean of its rounds'), its standard error from the
    cycles, the baseline the median over the paired rounds. A row without a whole cycle, or with
    fewer than two paired rounds, is nonstandard: counted nowhere."""
    runs = payload["sweep"]["runs"]
    speeds: dict[tuple[str, int, int], float] = {}  # (variant, rep, batch) -> tg_tps
    for run in runs:  # a run that exited non-zero still gives the rows it has
        for row in run["rows"]:
            speeds[run["variant"], run["rep"], row["batch_size"]] = row["tg_tps"]
    usable = {key: value for key, value in speeds.items() if math.isfinite(value) and value > 0}
    cycles = whole_cycles(runs)
    found = {}
    for variant, batch in sorted({(variant, batch) for variant, _, batch in speeds}):
        bases = [
            speeds[baseline, rep, batch]
            for (name, rep, size) in usable
            if name == variant and size == batch and (baseline, rep, batch) in usable
        ]
        cycle_logs: list[float] = []
        first_cycle: list[float] = []
        first_block: tuple[int, ...] = ()
        for block in cycles:
            pairs = [(usable.get((variant, rep, batch)), usable.get((baseline, rep, batch))) for rep in block]
            if any(top is None or bottom is None for top, bottom in pairs):
                continue
            ratios = [math.log(top / bottom) for top, bottom in pairs]  # type: ignore[operator]
            if not first_cycle:
                first_cycle, first_block = ratios, block
            cycle_logs.append(math.fsum(ratios) / len(ratios))
        if not cycle_logs or len(bases) < 2:
            continue
        m = len(cycle_logs)
        k = len(first_cycle)
        spread = None
        if m == 1 and variant != baseline:  # a position's slowdown cancels in the cycle: not noise
            spread = one_cycle_spread([run for run in runs if run["rep"] in first_block], batch)
        if m >= 2:
            log_se, df = _stdev(cycle_logs) / math.sqrt(information(m)), m - 1
        elif spread is not None:
            log_se, df = spread * math.sqrt(2 / k), (k - 1) * (k - 2)
        else:  # two variants: the rounds' spread, which errs wide
            log_se, df = _stdev(first_cycle) / math.sqrt(k), k - 1
        found[variant, batch] = (math.exp(median(cycle_logs)), median(bases), log_se, df, m)
    return found


def exclusion(submission: Submission, variant: str, baseline: str) -> str | None:
    """The first reason that applies to the row (submission, variant, *), or None when it counts."""
    if submission.state in ("hidden", "withdrawn", "held"):
        return submission.state
    payload = submission.payload
    statuses = [entry["status"] for entry in payload["correctness"] if entry["variant"] == variant]
    if "fail" in statuses:
        return "correctness_failed"
    if "pass" not in statuses:
        return "correctness_not_run"
    if variant != baseline and degenerate(payload["generation"], variant, baseline):
        return "degenerate_output"
    if run_state(payload):
        return "run_state"
    return None


def degenerate(generation: Iterable[Mapping[str, Any]], variant: str, baseline: str) -> bool:
    """Some output of the variant loops where the baseline's, for the same prompt, is absent or clean."""
    entries = list(generation)
    baseline_loops = {e["prompt_id"] for e in entries if e["variant"] == baseline and e["degenerate"]}
    return any(e["variant"] == variant and e["degenerate"] and e["prompt_id"] not in baseline_loops for e in entries)


def run_state(payload: Mapping[str, Any]) -> bool:
    machine = payload["machine"]
    return (
        any(flag in payload.get("flags", []) for flag in RUN_STATE_FLAGS)
        or machine.get("power_source") == "battery"
        or machine.get("low_power_mode") is True
        or machine.get("thermal") == "pressure"
    )


# ---------------------------------------------------------------- per cell


Named = tuple[datetime, str, str, str]  # received_at, submission id, model (label or file name), quant


@dataclass
class Tally:
    """What one cell gathers: the included rows, the excluded counts, the keys still pending, and
    the submissions that name the model: the earliest one it counts, else the earliest with a row."""

    first: Named
    first_counted: Named | None = None
    rows: list[Measured] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    pending: set[str] = field(default_factory=set)

    @property
    def named_by(self) -> Named:
        return self.first_counted or self.first


def recompute(snapshot: Snapshot) -> dict[str, list[Row]]:
    """Campaign slug -> its leaderboard rows, in the API's row shape; reads the submissions once."""
    pages: dict[PageId, dict[PageKey, Tally]] = defaultdict(dict)
    for submission in snapshot.submissions:
        payload = submission.payload
        version = version_of(payload, snapshot.versions[payload["campaign"]])
        manifest = version.manifest
        if nonstandard(payload, manifest):
            continue
        baseline, machine, model = manifest["baseline"], payload["machine"], payload["model"]
        where = (manifest["slug"], machine["chip"], machine["gpu_cores"], model["sha256"], machine["backend"])
        page = pages[(*where, version.cells)]
        commits = {variant["name"]: variant["commit"] for variant in payload["variants"]}
        reasons = {name: exclusion(submission, name, baseline) for name in commits}
        # A file whose name a rule decides (a pin, a dispute, several names sent) is named as the snapshot
        # says; the networks that decide it are not published.
        shown = snapshot.names.get(model["sha256"], (model.get("label") or model["file_name"], model["file_type"]))
        named: Named = (submission.received_at, submission.id, *shown)
        pending = snapshot.pending(submission.keyid)
        for (variant, batch), (ratio, base, log_se, df, n_cycles) in paired_rows(payload, baseline).items():
            tally = page.setdefault((variant, commits[variant], batch), Tally(named))
            tally.first = min(tally.first, named)  # a file out of order: the earliest still names the model
            reason = reasons[variant]
            if reason:
                tally.excluded[reason] += 1
            elif pending:
                tally.pending.add(submission.keyid)
            else:
                numbers = (ratio, base, log_se, df, n_cycles)
                tally.rows.append(Measured(submission.keyid, submission.contributor, *numbers))
                tally.first_counted = min(tally.first_counted or named, named)
    boards: dict[str, list[Row]] = {slug: [] for slug in snapshot.campaigns}
    for page_id in sorted(pages, key=lambda p: (p[0], p[1], -1 if p[2] is None else p[2], p[3], p[4], p[5])):
        versions = snapshot.versions[page_id[0]]
        # Judged by the rules of the newest version among those its cells are numbered by.
        rules = [version for version in versions if version.cells == page_id[5]][-1].rules
        boards[page_id[0]] += page_rows(page_id, pages[page_id], rules, page_id[5] != versions[-1].cells)
    return boards


def page_rows(page_id: PageId, tallies: Mapping[PageKey, Tally], rules: Rules, superseded: bool) -> list[Row]:
    _, chip, gpu_cores, sha256, backend, campaign_version = page_id
    found = page_stats(
        {key: tally.rows for key, tally in tallies.items()},
        headline_sizes=rules.headline_sizes,
        min_effect=rules.min_effect,
        predict_cycles=rules.predict_cycles,
    )
    rows = []
    for (variant, commit, batch), tally in sorted(tallies.items(), key=lambda item: (item[0][2], item[0])):
        numbers = found.cells[variant, commit, batch]
        rows.append(
            {
                "chip": chip,
                "gpu_cores": gpu_cores,
                "model": tally.named_by[2],
                "model_sha256": sha256,
                "quant": tally.named_by[3],
                "variant": variant,
                "commit": commit,
                "batch_size": batch,
                "baseline_tg_tps": numbers.baseline_tg_tps,
                "tg_tps": numbers.tg_tps,
                "speedup": numbers.speedup,
                "interval": numbers.interval,
                "ci_low": numbers.ci_low,
                "ci_high": numbers.ci_high,
                "predict_low": numbers.predict_low,
                "predict_high": numbers.predict_high,
                "predict_level": numbers.predict_level,
                "tau": numbers.tau,
                "i2": numbers.i2,
                "verdict": numbers.verdict,
                "min_effect": rules.min_effect,
                "campaign_version": campaign_version,
                "superseded": superseded,
                "n_machines": numbers.n_machines,
                "n_submissions": numbers.n_submissions,
                "n_contributors": numbers.n_contributors,
                "n_pending": len(tally.pending),
                "excluded": dict(tally.excluded),
                "backend": backend,
                "control": backend not in rules.patched_backends,
            }
        )
    return rows


# ---------------------------------------------------------------- comparison with the live API


def row_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(name) for name in KEY_FIELDS)


def same(field_name: str, ours: Any, theirs: Any) -> bool:
    """Numbers within a relative 1e-9; strings, integers, booleans, null and the excluded counts exactly."""
    numbers = all(isinstance(value, int | float) and not isinstance(value, bool) for value in (ours, theirs))
    if field_name in FLOAT_FIELDS and numbers:
        return math.isclose(ours, theirs, rel_tol=REL_TOL)
    return bool(ours == theirs)


def compare(slug: str, ours: Sequence[Row], theirs: Sequence[Row]) -> tuple[int, int, list[str]]:
    """(cells seen on either side, cells that differ, one line per difference)."""
    mine, live = {row_key(r): r for r in ours}, {row_key(r): r for r in theirs}
    copies = Counter(row_key(r) for r in theirs)
    lines, differing = [], 0
    for key in sorted(mine.keys() | live.keys(), key=lambda k: json.dumps(k)):
        chip, gpu_cores, sha256, backend, variant, commit, batch, version = key
        where = (
            f"{slug} chip={chip!r} gpu_cores={gpu_cores} model={str(sha256)[:12]} backend={backend} "
            f"variant={variant}@{str(commit)[:12]} b={batch} campaign_version={version}"
        )
        if copies[key] > 1:
            found = [f"{where}: {copies[key]} rows on the live API"]
        elif key not in live:
            found = [f"{where}: missing from the live API"]
        elif key not in mine:
            found = [f"{where}: on the live API but not recomputed"]
        else:
            a, b = mine[key], live[key]
            found = [
                f"{where}: {name} recomputed {json.dumps(a.get(name))} live {json.dumps(b.get(name, '<absent>'))}"
                for name in (*FLOAT_FIELDS, *EXACT_FIELDS)
                if name not in b or not same(name, a[name], b[name])
            ]
        differing += bool(found)
        lines += found
    return len(mine.keys() | live.keys()), differing, lines


def fetch(url: str) -> bytes:
    return fetch_with_headers(url)[0]


def fetch_with_headers(url: str) -> tuple[bytes, Mapping[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return bytes(response.read()), response.headers
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise Unreachable(f"{url}: {exc}") from None


def download_snapshot(server: str) -> bytes:
    """GET /api/v1/snapshot/, its body checked against the SHA-256 the server states for it
    (Repr-Digest, RFC 9530, else X-Snapshot-Sha256): a cut or altered download is bad input."""
    data, headers = fetch_with_headers(f"{server.rstrip('/')}/api/v1/snapshot/")
    stated = snapshot_sha256(headers)
    if stated is not None and stated != hashlib.sha256(data).hexdigest():
        raise BadInput(f"the snapshot's {len(data)} bytes do not have the sha256 the server states for them, {stated}")
    return data


def snapshot_sha256(headers: Mapping[str, str]) -> str | None:
    """The hex SHA-256 a snapshot response states, or None when it states none (an older server)."""
    for entry in (headers.get("Repr-Digest") or "").split(","):
        name, _, value = entry.strip().partition("=")
        if name == "sha-256" and value.startswith(":") and value.endswith(":"):
            return base64.b64decode(value[1:-1]).hex()
    stated = headers.get("X-Snapshot-Sha256")
    return stated.lower() if stated else None


def live_rows(server: str, slug: str) -> list[Row]:
    url = f"{server.rstrip('/')}/api/v1/leaderboard/?{urllib.parse.urlencode({'campaign': slug})}"
    try:
        rows = json.loads(fetch(url))["rows"]
    except (ValueError, KeyError, TypeError):
        raise Unreachable(f"{url}: not a leaderboard body") from None
    return list(rows)


def run(args: argparse.Namespace, report: TextIO) -> int:
    if args.snapshot:
        with open(args.snapshot, "rb") as file:
            data = file.read()
    else:
        data = download_snapshot(args.server)
    snapshot = parse_snapshot(data)
    boards = recompute(snapshot)
    if snapshot.failures:
        for failure in snapshot.failures:
            print(f"NOT VERIFIED {failure}", file=report)
        print(f"{len(snapshot.failures)} envelope(s) or key(s) do not verify; no cell was compared", file=report)
        return 2
    if args.json:
        baselines = {slug: manifest["baseline"] for slug, manifest in snapshot.campaigns.items()}
        print(json.dumps([{"campaign": s, "baseline": baselines[s], "rows": rows} for s, rows in boards.items()]))
    if not args.server:
        print(f"{sum(map(len, boards.values()))} cells recomputed; no server given, nothing compared", file=report)
        return 0
    total = differing = 0
    for slug, rows in boards.items():
        seen, differ, lines = compare(slug, rows, live_rows(args.server, slug))
        total, differing = total + seen, differing + differ
        for line in lines:
            print(line, file=report)
    print(f"{total} cells, {differing} differ", file=report)
    return 1 if differing else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", help="base URL of a benchhub service, e.g. https://benchhub.example")
    parser.add_argument("--snapshot", help="a saved snapshot (.jsonl.gz) instead of the server's")
    parser.add_argument("--json", action="store_true", help="print the recomputed cells as JSON on stdout")
    args = parser.parse_args(argv)
    if not args.server and not args.snapshot:
        parser.error("give --server, --snapshot, or both")
    report = sys.stderr if args.json else sys.stdout  # stdout stays pure JSON with --json
    if MISSING_DEPENDENCY:
        print(
            f"recompute_cells.py needs PyNaCl to verify signatures ({MISSING_DEPENDENCY}): pip install pynacl",
            file=sys.stderr,
        )
        return 4
    try:
        return run(args, report)
    except Unreachable as exc:
        print(f"server unreachable: {exc}", file=report)
        return 3
    except BadInput as exc:
        print(f"bad input: {exc}", file=report)
        return 2
    except (OSError, KeyError, TypeError, AttributeError, ValueError) as exc:
        print(f"bad input: {type(exc).__name__}: {exc}", file=report)
        return 2


if __name__ == "__main__":
    sys.exit(main())
