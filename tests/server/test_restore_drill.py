"""Issue 46's restore drill (bench/drill.py) at a small size: a PostgreSQL service holding every kind
of row (two campaigns under four signed versions, withdrawals, hidden rows and a retired key,
quarantined rows held and released, model claims in conflict, keys on probation, a control page),
its public snapshot, a fresh PostgreSQL database restored from that file, both served by gunicorn.
The restored service publishes the same snapshot, the standalone recompute finds 0 cells differing
on either, and the same pages read the same. `python -m bench drill --size 10000` is the
full size (docs/reliability.md)."""

from __future__ import annotations

import os
from pathlib import Path

from bench import drill

SIZE = 100
# Fewer pages than the full drill's, each kind still reached.
CAPS = {
    "home": 12,
    "chip": 12,
    "campaign": 2,
    "contributor": 6,
    "submission": 24,
    "envelope": 2,
    "compare": 2,
    "api": 16,
    "csv": 2,
}
EVERY_KIND = (
    "few_row_mma", "withdrawn", "hidden", "keys_banned", "quarantined", "released", "model_held", "control",
    "probation",
)  # fmt: skip


def test_a_service_restored_from_its_snapshot_serves_the_same_snapshot_cells_and_pages(tmp_path: Path) -> None:
    host = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    name = f"bh_perf_drilltest_{os.getpid()}"
    original, restored = f"{host}/{name}_original", f"{host}/{name}_restored"
    try:
        figures = drill.run(original, restored, SIZE, seed=46, workdir=tmp_path, caps=CAPS)
    finally:
        drill.drop_database(original)
        drill.drop_database(restored)
    report = "\n".join(figures.lines())
    assert figures.counts["submissions"] == SIZE, report
    assert figures.counts["campaign_versions_signed"] == 4, report
    assert all(figures.counts[kind] > 0 for kind in EVERY_KIND), report
    assert figures.counts_agree, report
    assert figures.snapshot_records > SIZE and figures.snapshot_differences == [], report
    assert figures.cells > 1000, report
    # The standalone recompute agrees with both services on every cell (a disputed file's name from the
    # snapshot's model_name records), and finds on the restored one what it finds on the original.
    assert figures.cells_differing == 0 and figures.original_cells_differing == 0, report
    assert figures.recompute_output == figures.original_recompute_output, report
    assert set(figures.pages) == set(CAPS) and sum(figures.pages.values()) > 50, report
    assert figures.pages_differing == [], report
