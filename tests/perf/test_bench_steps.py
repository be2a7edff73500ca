"""`python -m bench growth` and `all` run each step as a process of its own: Django reads its database
once per process, and `all` once measured the large state's refresh and reads on the 1k database."""

from __future__ import annotations

import pytest

import bench.__main__ as bench_cli

LARGE = f"{bench_cli.HOST}/bh_perf_1000k"


def _plan(*argv: str) -> list[tuple[str, str]]:
    steps = bench_cli.steps(bench_cli.arguments().parse_args(list(argv)))
    parsed = [bench_cli.arguments().parse_args(step) for step in steps]  # each step is a valid command line
    return [(options.what, options.database) for options in parsed]


def test_growth_alternates_the_two_states_for_ingest_and_refresh() -> None:
    small = bench_cli.SMALL
    expected = [(verb, database) for database in (small, LARGE, LARGE, small) for verb in ("ingest", "refresh")]
    assert _plan("growth", "--database", LARGE) == expected


def test_all_measures_each_state_on_its_own_database() -> None:
    plan = _plan("all", "--size", "1000000")
    assert plan[:2] == [("state", bench_cli.SMALL), ("state", LARGE)]
    assert plan[-3:] == [("profile", bench_cli.SMALL), ("reads", LARGE), ("storage", LARGE)]
    assert plan[2:-3] == _plan("growth", "--database", LARGE)


def test_all_passes_its_options_to_every_step() -> None:
    steps = bench_cli.steps(bench_cli.arguments().parse_args(["all", "--rounds", "5", "--no-csv"]))
    for step in steps:
        options = bench_cli.arguments().parse_args(step)
        assert (options.rounds, options.csv) == (5, False)


def test_a_process_refuses_a_second_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_cli, "_configured_for", None)
    bench_cli.claim_database(bench_cli.SMALL)
    bench_cli.claim_database(bench_cli.SMALL)
    with pytest.raises(RuntimeError, match=r"run .*bh_perf_1000k as its own python -m bench"):
        bench_cli.claim_database(LARGE)
