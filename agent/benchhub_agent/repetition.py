"""The degenerate-output check: does the generated text end in a loop?

A greedy decoder that falls into a loop stays in it: from some point on, the output is a period that
repeats to the end, exactly or with small edits ("It is 3000 miles long. It is 3000 miles long. It
is 3"). So the detector looks for a repeating tail: for every candidate period p, the longest
suffix in which almost every word equals the word p places earlier, and whose last stretch repeats
too (a loop that was left again is not a tail).

Words are compared, not punctuation, and a list's numbers are not words. In prose a quarter of the
words of a copy may change (varied repeats: "The ocean is vast. The ocean is deep. ..."), and a word
dropped or added shifts the loop without ending it. Data and code (tables, CSV, JSON arrays of similar
objects, code with similar lines: a symbol or more per word) change a field or two per row by design,
so there only exact copies count, counters aside. A refrain repeats but is followed by new verses, so
it is not a tail.

repetition_score is the share of the words that lie in the repeating tail (0 when none). The labelled
corpus in tests/agent/corpus/ and docs/method.md give its precision and recall.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_EDIT_RATE = 0.25  # in prose, at most one word in four may differ from the word one period earlier
# Data and code (tables, CSV, JSON, code: about a symbol or more per word) vary a field or two per row
# by design, a few percent of their words (one op name in 33 words of a CSV row pair); there only exact
# copies are a loop (counters aside).
MAX_EDIT_RATE_STRUCTURED = 0.0
STRUCTURED_SYMBOLS_PER_WORD = 0.75
MIN_COPIES = 3  # the period, then at least two repeats of it
MIN_TAIL_WORDS = 8  # a shorter tail is too little to call a loop ("ha ha ha")
DEGENERATE_SHARE = 0.2  # a loop that starts as late as 80% of the output still counts
# CJK and kana are written without spaces: each character is a word of its own.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Tail:
    period: int  # in words
    start: int  # index of the first word of the first copy
    words: int  # how many words there are in all


_LIST_NUMBER = re.compile(r"^(\s*)\d+(?=[.)]\s)", re.MULTILINE)


def _units(text: str) -> list[str]:
    # A list's numbers say nothing about its content: "9. Earth 10. Jupiter ... 13. Earth 14. Jupiter"
    # loops, "1. Mercury 2. Venus" does not, whatever the numbers.
    words = _WORD.findall(_LIST_NUMBER.sub(r"\g<1>0", text).lower())
    # A loop of symbols or blank lines alone ("!!!!", "\n  \n  ") has no words: compare characters.
    return words if len(words) >= MIN_TAIL_WORDS else list(text.strip("\n"))


def _same(word: str, earlier: str) -> bool:
    # A counter that steps by one is no new content: "8. Neptune 9. Neptune 10. Neptune" is a loop.
    return word == earlier or (word.isdigit() and earlier.isdigit() and int(word) == int(earlier) + 1)


def _repeats(units: list[str], index: int, period: int) -> bool:
    """The word repeats the one a period earlier, or its neighbour there: a word dropped or added in one
    copy ("O N P S O N P O N P S") shifts the rest of the loop by one, and the loop goes on."""
    return any(_same(units[index], units[index - lag]) for lag in (period, period - 1, period + 1) if 0 < lag <= index)


def _tail_for_period(units: list[str], period: int, edit_rate: float) -> int:
    """Start of the longest suffix in which every stretch of `window` words mostly equals the words one
    period earlier (so the repeats run to the end), or len(units) when there is none."""
    n = len(units)
    window = max(period, MIN_TAIL_WORDS)
    differs = [not _repeats(units, index, period) for index in range(n - 1, period - 1, -1)]
    best = n
    in_window = 0
    for walked, differ in enumerate(differs):
        in_window += differ - (differs[walked - window] if walked >= window else 0)
        if in_window > edit_rate * window:
            break
        if not differ:
            best = n - 1 - walked - period  # the first copy starts one period before the first repeat
    return best if n - best >= MIN_COPIES * period else n


def repeating_tail(text: str) -> Tail | None:
    """The longest repeating tail of the text, or None."""
    units = _units(text)
    n = len(units)
    symbols = sum(1 for char in text if not char.isalnum() and not char.isspace())
    structured = symbols >= STRUCTURED_SYMBOLS_PER_WORD * max(1, len(_WORD.findall(text)))
    edit_rate = MAX_EDIT_RATE_STRUCTURED if structured else MAX_EDIT_RATE
    best: Tail | None = None
    for period in range(1, n // MIN_COPIES + 1):
        start = _tail_for_period(units, period, edit_rate)
        if n - start >= MIN_TAIL_WORDS and (best is None or n - start > best.words):
            best = Tail(period, start, n - start)
    return best


def repetition_score(text: str) -> float:
    tail = repeating_tail(text)
    units = _units(text)
    return round(tail.words / len(units), 4) if tail and units else 0.0


def is_degenerate(score: float) -> bool:
    return score >= DEGENERATE_SHARE
