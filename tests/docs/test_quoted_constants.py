"""A figure a doc quotes as a property of the code comes from the code.

A quote is marked where it stands: the value, then `<!-- = EXPR -->`, an HTML comment that
Markdown does not show. EXPR is a Python expression over the names in NAMES; the word just before
the marker must equal its value. `120/hour<!-- = default("BENCHHUB_THROTTLE_ADDRESS") -->` reads
the default of that variable in benchhub/environment.py (the production one: the suite runs with
DEBUG on); `30<!-- = rounds.MAX_ROUNDS -->` a constant.
A word is compared as a number where it reads as one (`1,048,576`, `2%` is 0.02, `1e-9`), else as
text, backticks and trailing punctuation aside. Change a constant and the doc quoting it goes red.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import sweep
from benchhub_agent.errors import ExitCode
from benchhub_protocol import envelope, meta, rounds, schema, stats, words

from benchhub import environment
from benchhub.api import snapshot
from benchhub.results import campaigns, claims, copies, plausibility
from tests.recompute.builder import load_script

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "agent" / "README.md"])
MARKER = re.compile(r"(\S*?)\s*<!-- = (.+?) -->")


NAMES: dict[str, Any] = {
    "recompute": load_script(),  # scripts/recompute_cells.py
    "default": environment.default,
    "envelope": envelope,
    "rounds": rounds,
    "schema": schema,
    "stats": stats,
    "meta": meta,
    "words": words,
    "ExitCode": ExitCode,
    "sweep": sweep,
    "campaigns": campaigns,
    "claims": claims,
    "copies": copies,
    "plausibility": plausibility,
    "snapshot": snapshot,
}


def read(word: str) -> Any:
    word = word.strip("`*_([±").rstrip(".,;:)]`*_")
    number = word.replace(",", "")
    try:
        return float(number[:-1]) / 100 if number.endswith("%") else float(number)
    except ValueError:
        return word


def agrees(quoted: Any, value: Any) -> bool:
    if isinstance(quoted, float) and isinstance(value, int | float) and not isinstance(value, bool):
        return math.isclose(quoted, float(value), rel_tol=1e-9)
    return quoted == str(value)


def quotes(path: Path) -> list[tuple[int, str, str]]:
    return [
        (number, match.group(1), match.group(2))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in MARKER.finditer(line)
    ]


def wrong_quotes(path: Path) -> list[str]:
    wrong = []
    for number, word, expression in quotes(path):
        value = eval(expression, dict(NAMES))  # the docs are this repository's own text
        if not agrees(read(word), value):
            wrong.append(f"{path.name}:{number}: the doc says {word!r}, the code {expression} is {value!r}")
    return wrong


@pytest.mark.parametrize("path", DOCS, ids=[str(path.relative_to(ROOT)) for path in DOCS])
def test_every_quoted_constant_agrees_with_the_code(path: Path) -> None:
    assert wrong_quotes(path) == []


def test_the_docs_quote_the_code_at_all() -> None:
    assert sum(len(quotes(path)) for path in DOCS) >= 20


def test_it_goes_red_when_a_constant_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "page.markdown"
    doc.write_text(
        "At most 30<!-- = rounds.MAX_ROUNDS --> rounds; 120/hour<!-- = default('BENCHHUB_THROTTLE_ADDRESS') -->"
        " per address; `1,048,576`<!-- = default('BENCHHUB_MAX_BODY_BYTES') --> bytes; 2%<!-- = 0.02 -->.\n"
    )
    monkeypatch.setattr(rounds, "MAX_ROUNDS", 30)  # the page's figure, whatever the cap is today
    assert wrong_quotes(doc) == []
    monkeypatch.setattr(rounds, "MAX_ROUNDS", 31)
    assert wrong_quotes(doc) == ["page.markdown:1: the doc says '30', the code rounds.MAX_ROUNDS is 31"]


def test_it_reads_the_production_default_not_the_suites() -> None:
    assert environment.default("BENCHHUB_KEY_PROBATION_S") == 86400
    assert environment.default("BENCHHUB_KEY_PROBATION_S", debug=True) == 0
    assert environment.default("BENCHHUB_THROTTLE_READ") == "120/minute"
