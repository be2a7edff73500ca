"""`bench ingest`'s pages by relation (bench/relations.py): full-page images are read off the block
references pg_walinspect prints, and the relations are ranked by what a submission cost them."""

from __future__ import annotations

from bench.relations import FULL_PAGE_IMAGE, RelationTraffic, traffic_lines

# Printed by PostgreSQL 15's pg_walinspect on this machine: a pruned catalogue page written whole,
# then an insert into an index that references two blocks without an image.
BLOCK_REFS = (
    "blkref #0: rel 1663/28931/1255 fork main blk 44 (FPW); hole: offset: 176, length: 1064",
    "blkref #0: rel 1663/28931/28943 fork main blk 1 blkref #2: rel 1663/28931/28943 fork main blk 0",
    "blkref #0: rel 1663/16387/16610 fork main blk 0 (FPW); hole: offset: 40, length: 8000 "
    "blkref #1: rel 1663/16387/16611 fork fsm blk 2 (FPW)",
)


def test_it_counts_each_full_page_image_with_its_database_and_file() -> None:
    found = [match for block_ref in BLOCK_REFS for match in FULL_PAGE_IMAGE.findall(block_ref)]
    assert found == [("28931", "1255"), ("16387", "16610"), ("16387", "16611")]


def test_it_ranks_relations_by_pages_read_and_written_a_submission() -> None:
    rounds = [
        (RelationTraffic({"a": 30, "b": 300}, {"a": 9, "b": 3, "c": 600}, {"a": 300, "c": 3}), 100),
        (RelationTraffic({"a": 10, "b": 100}, {"a": 1, "b": 1}, {"a": 90}), 100),
    ]
    lines = traffic_lines("floor", rounds, top=2)
    assert lines[0].startswith("floor, pages per accepted submission (median of 2 rounds)")
    assert [line.split()[0] for line in lines[1:]] == ["a", "b"]  # a: 0.2 read + 1.95 images; b: 2.0 read
    assert lines[1].split()[1:] == ["0.20", "|", "0.05", "|", "1.95"]
    unmeasured = traffic_lines("http", [(RelationTraffic({"a": 5}, {}, None), 5)])
    assert unmeasured[1].split()[1:] == ["1.00", "|", "0.00", "|", "n/a"]
