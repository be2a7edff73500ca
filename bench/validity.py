"""`python -m bench validity`: the error rates of the leaderboard's verdicts, by simulation with a
known truth (issues 35 and 43). Every figure comes from the shared package's own code, the code the
agent, the server and (a copy, tested equal) the recompute script run: cycles.submission_estimates
on each simulated submission's runs, stats.page_stats on each simulated group; on fixed seeds, with
its Monte-Carlo error (the standard error over independent groups or rankings; for a count of zero,
the 95% upper bound 1 - 0.05^(1/N)).

`--quick` runs a tenth of the replicates. `--write` runs both and writes bench/validity.txt, whose
full table docs/method.md quotes; the file also holds a digest of the statistics' modules and of
this simulation, so tests/protocol/test_validity.py goes red when either changes and the file was
not rewritten (it reruns a few parts of the quick run).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import hashlib
import itertools
import math
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchhub_protocol import cycles, distributions, meta, stats, words

from bench import validity_world as sim

OUTPUT = Path(__file__).with_name("validity.txt")
SOURCES = (
    Path(stats.__file__),
    Path(meta.__file__),
    Path(cycles.__file__),
    Path(distributions.__file__),
    Path(__file__),
    Path(sim.__file__),
)
FULL, QUICK = 1.0, 0.1
POWER_MACHINES = (3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 30, 50)
TRIVIAL_MACHINES = (3, 5, 8, 12, 20, 50)
MIXED_CYCLES = (1, 1, 1, 2, 2, 3, 4, 5, 8, 10, 15)
RANKING_MACHINES = (1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 12, 16, 25)  # a crowd: most chips have few machines
RANKING_PAGES = 20
WIDTH = 90  # of a figure's label


@dataclass(frozen=True)
class Figure:
    label: str
    value: float
    error: float
    target: str
    holds: bool | None
    unit: str = "%"

    def line(self) -> str:
        if self.unit == "%":
            value, error = f"{100 * self.value:.2f}%", f"±{100 * self.error:.2f}%"
        elif self.unit == "points":
            value, error = (
                f"{self.value:+.3f}".replace("-0.000", "±0.000").replace("+0.000", "±0.000"),
                f"±{self.error:.3f}",
            )
        else:  # a check with no figure of its own
            value, error = "", ""
        holds = {True: "yes", False: "NO", None: ""}[self.holds]
        return f"{self.label:<{WIDTH}} {value:>8} {error:>8}  {self.target:<9} {holds}".rstrip()


def pages(world: sim.World, count: int, seed: int) -> Iterator[tuple[sim.Page, stats.PageStats]]:
    rng = random.Random(seed)
    for _ in range(count):
        page = sim.simulate_page(world, rng)
        yield page, sim.judge(page, world.predict_cycles)


def error_of(mean: float, se: float, n: int) -> float:
    """The Monte-Carlo error; where nothing was seen, the one-sided 95% upper bound instead."""
    return 1.0 - 0.05 ** (1.0 / n) if mean == 0.0 else se


def share(outcomes: list[float]) -> tuple[float, float]:
    mean, se = sim.rate(outcomes)
    return mean, error_of(mean, se, len(outcomes))


def verdicts(found: stats.PageStats) -> list[str]:
    return [cell.verdict for cell in found.cells.values()] + [h.verdict for h in found.headlines.values()]


def prediction_hits(page: sim.Page, found: stats.PageStats) -> list[bool]:
    """Whether each held-out machine's estimate (at the stated run length) fell in its cell's range."""
    return [
        covers(cell.predict_low, cell.predict_high, extra[key])
        for extra in page.extra
        for key, cell in found.cells.items()
        if key in extra and cell.predict_low is not None
    ]


def null_rates(label: str, world: sim.World, count: int, seed: int) -> list[Figure]:
    """A world with no typical change: how often a group reads "faster" or "slower" anywhere, what its
    cells read, and where new machines fall. Of a split world, the groups that drew machines of one
    population only are counted apart: no method sees a spread it did not sample."""
    world = replace(world, extra_machines=2)
    page_any, both_any, one_side, cell_share, within, varies, inside = [], [], [], [], [], [], []
    for page, found in pages(world, count, seed):
        found_verdicts = verdicts(found)
        called = [v in words.DIRECTIONAL for v in found_verdicts]
        page_any.append(float(any(called)))
        if world.split is not None:
            one_side.append(float(len(page.sides) == 1))
            if len(page.sides) == 2:
                both_any.append(float(any(called)))
        cell_share.append(sum(called) / len(called))
        within.append(sum(v == words.WITHIN for v in found_verdicts) / len(found_verdicts))
        varies.append(sum(v == words.VARIES for v in found_verdicts) / len(found_verdicts))
        hits = prediction_hits(page, found)
        inside.append(sum(hits) / len(hits))
    figures = []
    if world.split is None:
        value, error = share(page_any)
        figures.append(Figure(f"{label}: groups, any faster/slower", value, error, "≤ 5%", value <= 0.05))
    else:
        figures.append(Figure(f"{label}: groups, any faster/slower", *share(page_any), "", None))
        value, error = share(one_side)
        figures.append(Figure(f"{label}: groups drawn from one side only", value, error, "", None))
        value, error = share(both_any)
        figures.append(Figure(f"{label}: groups of both sides, any faster/slower", value, error, "≤ 5%", value <= 0.05))
    figures += [
        Figure(f"{label}: cells, faster/slower", *share(cell_share), "", None),
        Figure(f"{label}: cells, within ±2%", *share(within), "", None),
        Figure(f"{label}: cells, varies by machine", *share(varies), "", None),
    ]
    value, error = share(inside)
    target, holds = "75–85%", 0.75 <= value <= 0.85
    figures.append(Figure(f"{label}: a new machine inside the 80% range", value, error, target, holds))
    return figures


def faster_share(world: sim.World, count: int, seed: int) -> tuple[float, float]:
    outcomes = []
    for _, found in pages(world, count, seed):
        found_verdicts = verdicts(found)
        outcomes.append(sum(v == words.FASTER for v in found_verdicts) / len(found_verdicts))
    return share(outcomes)


POWER_LABEL = "power at +5%, {n} machines (σ 3%/round, 1% machines)"


def power_at(n: int, scale: float) -> list[Figure]:
    """The share of cells reading "faster" at a true +5% everywhere."""
    world = sim.World(n, effect=sim.constant(0.05), round_sd=0.03, machine_sd=0.01)
    value, error = faster_share(world, max(10, round(100 * scale)), seed=3000 + n)
    target, holds = ("≥ 80%", value >= 0.8) if n == 8 else ("", None)
    return [Figure(POWER_LABEL.format(n=n), value, error, target, holds)]


def power_heavy(scale: float) -> list[Figure]:
    heavy = sim.World(8, effect=sim.constant(0.05), round_sd=0.05, machine_sd=0.01, heavy=True)
    value, error = faster_share(heavy, max(10, round(100 * scale)), seed=3999)
    return [Figure("power at +5%, 8 machines, σ 5%/round, t3 tails", value, error, "", None)]


def monotone(figures: list[Figure]) -> Figure:
    """Whether power never drops (beyond 2 Monte-Carlo errors) as machines are added."""
    found = [next(f for f in figures if f.label == POWER_LABEL.format(n=n)) for n in POWER_MACHINES]
    holds = all(
        later.value >= earlier.value - 2 * math.hypot(earlier.error, later.error)
        for earlier, later in itertools.pairwise(found)
    )
    return Figure("power never drops as machines are added (beyond 2 MC errors)", 1, 0, "", holds, unit="")


def trivial(n: int, scale: float) -> list[Figure]:
    """A true +1%, half the smallest effect: how often a group shows a "faster" anywhere."""
    world = sim.World(n, effect=sim.constant(0.01))
    count = max(10, round(120 * scale))
    outcomes = [float(words.FASTER in verdicts(found)) for _, found in pages(world, count, seed=2000 + n)]
    value, error = share(outcomes)
    return [Figure(f"true +1%, {n} machines: groups, any faster", value, error, "≤ 5%", value <= 0.05)]


def covers(low: float | None, high: float | None, truth: float) -> bool:
    return low is not None and high is not None and low <= truth <= high


COVERAGE_WORLDS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("homogeneous", {}),
    ("σ 5%/round, t3 tails", {"round_sd": 0.05, "heavy": True}),
    ("position 2%, 1 cycle", {"position": 0.02, "cycles": (1,)}),
)


def coverage(index: int, scale: float) -> list[Figure]:
    """How often every interval of a group holds its truth at once: the shipped Hartung-Knapp
    intervals, and beside them the plain DerSimonian-Laird normal ones on the same groups."""
    figures = []
    name, options = COVERAGE_WORLDS[index]
    for n in (3, 4, 8, 12):
        world = sim.World(n, effect=sim.varying(0.10), machine_sd=0.01, **options)
        page_all, normal_all = [], []
        for page, found in pages(world, max(20, round(200 * scale)), seed=4000 + 100 * index + n):
            hits = [covers(c.ci_low, c.ci_high, page.truth[key]) for key, c in found.cells.items()]
            hits += [covers(h.ci_low, h.ci_high, page.headline_truth[key]) for key, h in found.headlines.items()]
            page_all.append(float(all(hits)))
            normal_all.append(float(all(normal_hits(page))))
        value, error = share(page_all)
        label = f"coverage, all of a group at once, {n} machines, {name}"
        figures.append(Figure(label, value, error, "≥ 93%", value >= 0.93))
        label = f"  the same with DerSimonian-Laird normal intervals (not shipped), {n} machines"
        figures.append(Figure(label, *share(normal_all), "", None))
    return figures


def normal_hits(page: sim.Page) -> list[bool]:
    """Whether each DerSimonian-Laird interval (normal quantile, same Bonferroni family) holds."""
    summary = stats.summarise_page(page.cells, headline_sizes=sim.HEADLINE_SIZES)
    families: dict[Any, Any] = {**{key: cell.machines for key, cell in summary.cells.items()}, **summary.headlines}
    truths: dict[Any, float] = {**page.truth, **page.headline_truth}
    judged = {key: meta.pool(machines) for key, machines in families.items() if len(machines) >= stats.MIN_MACHINES}
    quantile = distributions.normal_quantile(1 - (1 - stats.CONFIDENCE) / (2 * max(len(judged), 1)))
    return [abs(pooled.mean - math.log(truths[key])) <= quantile * pooled.dl_se for key, pooled in judged.items()]


def headline_bias(scale: float) -> list[Figure]:
    figures = []
    for miss in (0.0, 0.15):
        world = sim.World(12, effect=sim.varying(0.10), miss=miss)
        errors = []
        for page, found in pages(world, max(20, round(300 * scale)), seed=6000 + round(100 * miss)):
            for key, h in found.headlines.items():
                if h.speedup is not None:
                    errors.append(100 * (h.speedup - page.headline_truth[key]))
        mean, se = sim.rate(errors)
        label = f"headline bias (points), 12 machines, each misses a size w.p. {miss:.2f}"
        figures.append(Figure(label, mean, se, "|·| ≤ 0.5", abs(mean) <= 0.5, unit="points"))
    return figures


def ranking(scale: float) -> list[Figure]:
    """Rankings of RANKING_PAGES groups under A/A, each line one (chip, variant) headline,
    ordered by stats.evidence_key as the leaderboard orders them."""
    rng = random.Random(7000)
    any_faster, top_faster = [], []
    for _ in range(max(10, round(60 * scale))):
        lines: list[stats.HeadlineStats] = []
        for _ in range(RANKING_PAGES):
            world = sim.World(rng.choice(RANKING_MACHINES), machine_sd=0.0, round_sd=rng.choice((0.02, 0.03, 0.05)))
            lines += sim.judge(sim.simulate_page(world, rng)).headlines.values()
        lines.sort(key=stats.evidence_key)
        any_faster.append(float(any(line.verdict == words.FASTER for line in lines)))
        top_faster.append(float(lines[0].verdict == words.FASTER))
    value, error = share(any_faster)
    label = f'A/A rankings of {RANKING_PAGES} groups with any line "faster"'
    return [
        Figure(label, value, error, "≤ 5%", value <= 0.05),
        Figure('A/A rankings whose top line reads "faster"', *share(top_faster), "≤ 5%", share(top_faster)[0] <= 0.05),
    ]


AA = sim.World(8, machine_sd=0.0)
NULL_WORLDS: tuple[tuple[str, sim.World, int], ...] = (
    ("A/A, 8 machines, σ 3%/round", AA, 1001),
    ("A/A, 8 machines, σ 5%/round", replace(AA, round_sd=0.05), 1002),
    ("A/A, 4 machines, σ 3%/round", replace(AA, n_machines=4), 1003),
    ("A/A, 25 machines, σ 3%/round", replace(AA, n_machines=25), 1004),
    ("A/A, 8 machines, σ 5%/round, t3 tails", replace(AA, round_sd=0.05, heavy=True), 1005),
    ("no typical change, 8 machines, skewed 2%", replace(AA, machine_sd=0.02, skewed=True), 1006),
    ("split 70/30 (+3%/−7%), 8 machines", replace(AA, machine_sd=0.005, split=sim.Split(0.7, 0.03, -0.07)), 1007),
    ("split 90/10 (+1%/−9%), 8 machines", replace(AA, machine_sd=0.005, split=sim.Split(0.9, 0.01, -0.09)), 1008),
    ("±4% halves, 8 machines", replace(AA, machine_sd=0.005, split=sim.Split(0.5, 0.04, -0.04)), 1009),
    ("±4% halves, 50 machines", replace(AA, n_machines=50, machine_sd=0.005, split=sim.Split(0.5, 0.04, -0.04)), 1010),
    ("position 2%, 8 machines, 3 rounds", replace(AA, position=0.02, cycles=(1,)), 1011),
    ("position 2%, 8 machines, 6 rounds", replace(AA, position=0.02, cycles=(2,)), 1012),
    ("position 2%, 8 machines, 9 rounds", replace(AA, position=0.02, cycles=(3,)), 1013),
    ("mixed run lengths (1-15 cycles), 8 machines", replace(AA, cycles=MIXED_CYCLES, noise_spread=0.5), 1014),
    ("5% outlier machines (±10%), 20 machines", replace(AA, n_machines=20, machine_sd=0.01, outliers=0.05), 1015),
    ("5% outlier machines (±10%), 50 machines", replace(AA, n_machines=50, machine_sd=0.01, outliers=0.05), 1016),
    # Held out: chosen before any run of it, and never used to choose a rule. Its new machines run
    # the length a campaign would state for them, 2 cycles.
    (
        "held out: position 3%, σ 4%, 5 machines, 1–2 cycles",
        replace(AA, n_machines=5, round_sd=0.04, position=0.03, cycles=(1, 2), predict_cycles=2),
        1017,
    ),
)


def null_world(index: int, scale: float) -> list[Figure]:
    label, world, seed = NULL_WORLDS[index]
    base = 300 if world.n_machines <= 8 else 100
    return null_rates(label, world, max(20, round(base * scale)), seed)


PARTS: tuple[Callable[[float], list[Figure]], ...] = (
    *(functools.partial(null_world, index) for index in range(len(NULL_WORLDS))),
    *(functools.partial(trivial, n) for n in TRIVIAL_MACHINES),
    *(functools.partial(power_at, n) for n in POWER_MACHINES),
    power_heavy,
    *(functools.partial(coverage, index) for index in range(len(COVERAGE_WORLDS))),
    headline_bias,
    ranking,
)


def run_part(index: int, scale: float) -> list[Figure]:
    return PARTS[index](scale)


def table(scale: float, jobs: int = 2) -> list[Figure]:
    """Every figure, in PARTS order; each part seeds its own generators, so the figures are the
    same whatever the number of processes."""
    indices = range(len(PARTS))
    if jobs <= 1:
        figures = [figure for index in indices for figure in run_part(index, scale)]
    else:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            figures = [figure for part in pool.map(run_part, indices, [scale] * len(PARTS)) for figure in part]
    last_power = figures.index(next(f for f in figures if f.label.startswith("power at +5%, 8 machines, σ 5%")))
    return [*figures[: last_power + 1], monotone(figures), *figures[last_power + 1 :]]


def render(scale: float, jobs: int = 2) -> str:
    header = f"{'figure':<{WIDTH}} {'value':>8} {'MC error':>8}  {'target':<9} holds"
    return "\n".join([header, *(figure.line() for figure in table(scale, jobs))]) + "\n"


def digest() -> str:
    return hashlib.sha256(b"".join(path.read_bytes() for path in SOURCES)).hexdigest()


def constants() -> str:
    return (
        f"CONFIDENCE={stats.CONFIDENCE} PREDICT_LEVEL={stats.PREDICT_LEVEL} MIN_MACHINES={stats.MIN_MACHINES} "
        f"EFFECT_FLOOR={stats.EFFECT_FLOOR} CLEAR_SHARE={stats.CLEAR_SHARE} PREDICT_CYCLES={stats.PREDICT_CYCLES} "
        f"PRIOR_DF={meta.PRIOR_DF} MIN_EFFECT={sim.MIN_EFFECT}"
    )


def sections(text: str) -> dict[str, str]:
    """The parts of bench/validity.txt: "digest", "full" and "quick"."""
    found: dict[str, str] = {}
    name = None
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            name = line[3:].split()[0]
            found[name] = ""
        elif name is not None:
            found[name] += line
    return found


def run(argv: list[str] | None = None, out: Callable[[str], object] = sys.stdout.write) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench validity", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the replicates")
    parser.add_argument("--write", action="store_true", help=f"run both and write {OUTPUT.name}")
    parser.add_argument("--jobs", type=int, default=2, help="processes (the figures do not depend on it)")
    options = parser.parse_args(argv)
    if options.write:
        full, quick = render(FULL, options.jobs), render(QUICK, options.jobs)
        OUTPUT.write_text(f"## digest\n{digest()}\n{constants()}\n## full\n{full}## quick\n{quick}")
        out(full)
        return 0
    out(render(QUICK if options.quick else FULL, options.jobs))
    return 0
