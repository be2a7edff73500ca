"""How much of a generated text repeats itself: the degenerate-output check.

Score = share of word 4-grams that already occurred earlier in the text (0 = every 4-gram new,
1 = all repeats). A greedy loop ("It is 3000 miles long. It is 3000 miles long. ...") repeats nearly
all of its 4-grams; prose and even random-weight gibberish repeat almost none.

Measured on real outputs (tests/agent/test_repetition.py holds them):
  Gemma 3 270M IQ2_XXS loop, 96 tokens ....... 0.90
  Gemma 3 270M Q4_K_M loop, 96 tokens ........ 0.70
  random-weight llama gibberish, 48 tokens ... 0.00
  English prose (llama.cpp README paragraph) . 0.01
DEGENERATE_THRESHOLD sits between them with margin on both sides: a text in which more than 40% of
the 4-grams are repeats reads as a loop to a person, while a loop that starts late in a 96-token answer
(after ~40% of it) still crosses it.
"""

from __future__ import annotations

import re

NGRAM = 4
DEGENERATE_THRESHOLD = 0.4
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def _units(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    # Scripts without spaces (or a loop of one long token) would give too few words: use characters.
    return words if len(words) >= 2 * NGRAM else list(text)


def repetition_score(text: str) -> float:
    units = _units(text)
    grams = [tuple(units[i : i + NGRAM]) for i in range(len(units) - NGRAM + 1)]
    if len(grams) < 2:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for gram in grams:
        if gram in seen:
            repeats += 1
        seen.add(gram)
    return round(repeats / len(grams), 4)


def is_degenerate(score: float) -> bool:
    return score > DEGENERATE_THRESHOLD
