"""The memory-bandwidth bound on decode: a batch-B step reads the weights once, so a chip decodes at
most B x bandwidth / weight bytes tokens a second. Peak bandwidths per chip are data
(data/bandwidth.csv, each line with its source); a chip not listed gets a ceiling above any GPU."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

TABLE = Path(__file__).parent / "data" / "bandwidth.csv"
# Above any GPU's memory bandwidth (an H200 has 4.8 TB/s): the bound for chips not in the table.
CEILING_BYTES_PER_S = 10e12
# Room for a chip that beats its published peak a little, and for rounding in the table.
MARGIN = 1.25


@cache
def table() -> dict[str, tuple[float, str]]:
    """chip -> (bytes a second, source)."""
    with TABLE.open(newline="", encoding="utf-8") as handle:
        return {row["chip"]: (float(row["gb_per_s"]) * 1e9, row["source"]) for row in csv.DictReader(handle)}


def bandwidth_bytes_per_s(chip: str) -> float:
    return table().get(chip, (CEILING_BYTES_PER_S, ""))[0]
