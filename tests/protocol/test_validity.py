"""The figures docs/method.md quotes are what `python -m bench validity` prints now.

bench/validity.txt holds the full run (quoted by the doc), the quick run, the constants, and a
digest of stats.py and of the simulation. This test reruns the quick mode (same seeds) and goes
red when a quoted figure, a constant or the code behind them changes without
`python -m bench validity --write` and the doc being brought along."""

from __future__ import annotations

from pathlib import Path

from benchhub_protocol import stats

from bench import validity

DOC = Path(__file__).resolve().parents[2] / "docs" / "method.md"
BEGIN, END = "<!-- validity: begin -->\n```\n", "```\n<!-- validity: end -->"


def recorded() -> dict[str, str]:
    return validity.sections(validity.OUTPUT.read_text())


def test_the_recorded_run_is_of_the_code_and_constants_in_the_tree() -> None:
    digest, constants = recorded()["digest"].splitlines()
    assert digest == validity.digest(), "stats.py or the simulation changed: rerun python -m bench validity --write"
    assert constants == validity.constants()
    assert f"MIN_MACHINES={stats.MIN_MACHINES}" in constants


def test_the_doc_quotes_the_recorded_full_run_and_every_target_holds() -> None:
    text = DOC.read_text()
    quoted = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    assert quoted == recorded()["full"]
    assert " NO" not in quoted


def test_the_quick_run_gives_the_recorded_figures_again() -> None:
    assert validity.render(validity.QUICK) == recorded()["quick"]
