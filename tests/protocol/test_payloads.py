"""benchhub_protocol.payloads: the one builder of synthetic submissions builds what the schema
accepts, in the agent's interleaved order, with the numbers it was given."""

from __future__ import annotations

from typing import Any

from benchhub_protocol import cycles, envelope, payloads, rounds, schema

VARIANTS = [{"name": name, "commit": "0" * 40, "patches": [], "env": {}} for name in ("upstream", "01", "01+02")]
MODEL = {
    "file_name": "m.gguf",
    "sha256": "b" * 64,
    "size_bytes": 700_000_000,
    "architecture": "qwen3",
    "n_params": 1_720_574_976,
    "file_type": "IQ2_XXS",
    "tensor_bytes_by_type": {"IQ2_XXS": 500_000_000, "Q4_K": 150_000_000},
}
TG = {"upstream": 100.0, "01": 142.0, "01+02": 150.0}


def rows(name: str, rep: int) -> list[dict[str, Any]]:
    return [payloads.sweep_row(4, TG[name] + rep / 100, 500.0)]


def build(**changes: Any) -> dict[str, Any]:
    runs = payloads.interleaved_runs([variant["name"] for variant in VARIANTS], 4, rows)
    arguments = {"nonce": "1" * 32, "campaign": "mv-ext-iquants", "model": MODEL, "variants": VARIANTS}
    return payloads.submission(**arguments, runs=runs, batch_sizes=[4], **changes)


def test_it_builds_a_submission_the_schema_accepts() -> None:
    schema.validate_submission(build())
    schema.validate_submission(build(statuses={"01": "fail"}, looped={"01+02": True}, flags=["correctness_failed"]))


def test_it_interleaves_the_runs_as_the_agent_does() -> None:
    runs = build()["sweep"]["runs"]
    order = [(run["rep"], run["variant"]) for run in runs]
    assert order[:6] == [(1, "upstream"), (1, "01"), (1, "01+02"), (2, "01"), (2, "01+02"), (2, "upstream")]
    assert cycles.whole_cycles(runs) == [(1, 2, 3)], "rounds 1-3 are a cycle; round 4 starts the next"
    assert [run["seq"] for run in runs] == list(range(1, 13))
    assert rounds.round_ratios(runs, "01", "upstream", 4)[0] == (142.01 / 100.01)


def test_it_marks_what_went_wrong() -> None:
    body = build(statuses={"01": "fail"}, looped={"01+02": True})
    assert [entry["status"] for entry in body["correctness"]] == ["pass", "fail", "pass"]
    looped = {entry["variant"]: entry for entry in body["generation"]}["01+02"]
    assert looped["degenerate"] and not looped["identical_to_baseline"]


def test_it_signs_what_the_service_opens() -> None:
    signer = envelope.Signer.from_seed(bytes(32))
    body = payloads.signed_submission(build(), signer)
    opened = envelope.open_envelope(envelope.strict_loads(body), envelope.SUBMISSION_TYPE)
    assert envelope.verify_signature(opened, signer.keyid, signer.public_key)
    assert opened.payload == envelope.canonical_bytes(build())
