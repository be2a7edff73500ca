"""The words and defaults of a cell that every side applies (docs/protocol.md section 7): the six
verdicts with what each means and the mark a table shows for it, the campaign's default smallest
effect worth reporting, and the batch sizes the headline stands on. The agent, the service, its API
and its pages read them from here; nothing else spells them."""

from __future__ import annotations

from collections.abc import Iterable

FASTER = "faster"
SLOWER = "slower"
VARIES = "varies by machine"  # the machines' own changes spread beyond ±min_effect on both sides
WITHIN = "within"
UNCLEAR = "unclear"
TOO_FEW = "too few machines"
VERDICTS = (FASTER, SLOWER, VARIES, WITHIN, UNCLEAR, TOO_FEW)
DIRECTIONAL = (FASTER, SLOWER)  # the verdicts that present a change as shown

# What each verdict means, one phrase each: the API's field help and a table's legend.
VERDICT_MEANINGS = {
    FASTER: "a gain of at least min_effect that the evidence shows, on which the machines agree",
    SLOWER: "the same for a loss",
    VARIES: "the machines' true changes spread beyond ±min_effect on both sides (see the prediction range)",
    WITHIN: "the interval and the prediction range both lie inside ±min_effect",
    UNCLEAR: "none of these, with enough machines: more machines would settle it",
    TOO_FEW: "fewer machines than the method needs",
}
# The About page's five sentences: what a cell's number, interval and verdicts mean.
ABOUT_VERDICTS = (
    "Each cell compares a patched build with the baseline on the same machine, and its number is "
    "the typical machine's change: machines are combined as the studies of a meta-analysis, each weighted "
    "by its own precision, where a machine is one signing key. "
    "The interval beside it is 95% page-wise: all the intervals on one chip page hold together 95% of "
    'the time, so identical code shows a "faster" or "slower" somewhere on the page at most 5% of the time. '
    '"faster" or "slower" means that interval excludes no change, the change itself is at least the '
    "campaign's smallest effect worth reporting (2% unless the campaign says otherwise), and the machines "
    'agree on it; "varies by machine" means the machines\' own changes differ so much that some gain and '
    'others lose more than that threshold; "within ±2%" means both the interval and the range of new '
    "machines lie inside that threshold, so no machine is likely to see a change that matters. "
    '"unclear" means none of these holds yet and more machines would settle it, and "too few machines" means '
    "fewer than 3 machines, too few for an interval at all. "
    'The range labelled "what your Mac will likely see" is another thing: it is where 80% of new machines '
    "of that chip will land, running the campaign's default sweep, wider than the interval because "
    "machines differ from one another and each measures with its own noise."
)
# The mark a compact table cell shows beside its number; the legend and the tooltip give the word.
VERDICT_MARKS = {FASTER: "▲", SLOWER: "▼", VARIES: "↕", WITHIN: "≈", UNCLEAR: "?", TOO_FEW: "·"}

# A campaign's smallest effect worth reporting, where its manifest states none.
DEFAULT_MIN_EFFECT = 0.02

# Where a verify step of speculative decoding falls (docs/campaigns.md): the headline's batch sizes.
HEADLINE_BATCHES = (2, 8)


def in_headline(batch_size: int) -> bool:
    low, high = HEADLINE_BATCHES
    return low <= batch_size <= high


def headline_sizes(batch_sizes: Iterable[int]) -> list[int]:
    """The batch sizes of a sweep that its headline stands on, in order."""
    return sorted(size for size in batch_sizes if in_headline(size))
