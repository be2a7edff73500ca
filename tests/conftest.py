"""Shared fixtures: named personas with keys from fixed seeds, and a submission payload builder
derived from the protocol test vector's payload."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import envelope, payloads
from benchhub_protocol.payloads import signed_registration, signed_submission

VECTOR: dict[str, Any] = json.loads((Path(__file__).parent / "vectors" / "protocol-vector.json").read_text())
# The campaign's real patch files: their sha256 are the ones its signed versions name.
PATCH_TEXT = {
    name: (Path(__file__).parent.parent / "patches" / name).read_bytes()
    for name in ("01-mv-ext-iquants.patch", "02-vectorized-bs1.patch")
}
PERSONAS = ("ada", "bob", "cole", "dina", "eve")
# The environment mv-ext-iquants gives its 01+02 variant (protocol/benchhub_protocol/campaigns/).
VEC_ENV = {
    "GGML_METAL_MV_IQ2_XXS_VEC": "1",
    "GGML_METAL_MV_IQ2_XS_VEC": "1",
    "GGML_METAL_MV_IQ2_S_VEC": "1",
    "GGML_METAL_MV_IQ3_XXS_VEC": "1",
}

TgTable = Mapping[str, Mapping[int, list[float]]]


def persona(name: str) -> envelope.Signer:
    """The same key for the same name in every run."""
    return envelope.Signer.from_seed(hashlib.sha256(f"benchhub-test-persona:{name}".encode()).digest())


@pytest.fixture
def personas() -> dict[str, envelope.Signer]:
    return {name: persona(name) for name in PERSONAS}


def vector_payload() -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(VECTOR["submission_payload_utf8"])
    return payload


def build_payload(
    *,
    nonce: str | None = None,
    tg: TgTable | None = None,
    machine: Mapping[str, Any] | None = None,
    model: Mapping[str, Any] | None = None,
    correctness: Mapping[str, str] | None = None,
    degenerate: Mapping[str, bool] | None = None,
    patches_dir: Path | None = None,
) -> dict[str, Any]:
    """The vector's machine, model and build with real patch hashes, a fresh nonce and the numbers a
    test needs (benchhub_protocol.payloads builds it).

    `tg` maps variant -> batch size -> one tg_tps per rep; `correctness` maps variant -> status;
    `degenerate` maps variant -> whether its greedy output looped.
    """
    vector = vector_payload()
    nonce = nonce or uuid.uuid4().hex
    tg = tg or {"upstream": {1: [160, 160], 4: [148, 148]}, "01": {1: [160, 160], 4: [209.9, 210.1]}}
    reps = len(next(iter(next(iter(tg.values())).values())))

    # Prompt rates drawn from the nonce, row by row, in 500-1500 t/s: two payloads are then two
    # measurements, not one sent again within rounding (which no key may do), while every decode
    # figure stays as given. The same nonce gives the same bytes (a retry).
    def prompt_tps(name: str, rep: int, batch_size: int) -> float:
        drawn = hashlib.sha256(f"{nonce}/{name}/{rep}/{batch_size}".encode()).digest()
        return 500 + int.from_bytes(drawn[:4], "big") % 1_000_000 / 1000

    def rows(name: str, rep: int) -> list[dict[str, Any]]:
        return [
            payloads.sweep_row(batch_size, values[rep - 1], prompt_tps(name, rep, batch_size))
            for batch_size, values in sorted(tg[name].items())
        ]

    commit = vector["variants"][0]["commit"]
    patch_lists = {"upstream": [], "01": ["01-mv-ext-iquants.patch"], "01+02": list(PATCH_TEXT)}
    variants = [
        {
            "name": name,
            "commit": commit,
            "patches": [
                {"name": patch, "sha256": hashlib.sha256(PATCH_TEXT[patch]).hexdigest()} for patch in patch_lists[name]
            ],
            "env": dict(VEC_ENV) if name == "01+02" else {},
        }
        for name in tg
    ]
    return payloads.submission(
        nonce=nonce,
        campaign=vector["campaign"],
        created_at=vector["created_at"],
        agent=vector["agent"],
        machine={**vector["machine"], **(machine or {})},
        model=consistent_model({**vector["model"], **(model or {})}, model or {}),
        llama_cpp=vector["llama_cpp"],
        sweep={key: value for key, value in vector["sweep"].items() if key not in ("batch_sizes", "order", "runs")},
        variants=variants,
        runs=payloads.interleaved_runs(list(tg), reps, rows),
        batch_sizes=sorted({size for table in tg.values() for size in table}),
        statuses=correctness,
        looped=degenerate,
    )


def consistent_model(model: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A test that names another quant and not the tensors means a file of that quant: its main
    tensors become that quant's type (the service refuses facts that contradict each other)."""
    from benchhub_protocol.model_facts import DEFAULT_TENSOR_TYPE

    wanted = DEFAULT_TENSOR_TYPE.get(model["file_type"])
    if "file_type" not in overrides or "tensor_bytes_by_type" in overrides or wanted is None:
        return model
    tensors = dict(model["tensor_bytes_by_type"])
    tensors[wanted] = tensors.pop("IQ2_XXS", 0) + tensors.pop(wanted, 0)
    return {**model, "tensor_bytes_by_type": tensors}


@pytest.fixture(autouse=True)
def snapshot_dir(tmp_path: Path, settings: Any) -> Path:
    """Every test publishes its snapshots in a directory of its own, never the checkout's."""
    settings.BENCHHUB_SNAPSHOT_DIR = tmp_path / "snapshots"
    return Path(settings.BENCHHUB_SNAPSHOT_DIR)


def publish_snapshot() -> None:
    """The snapshot published now, as the periodic task does (a test reads it after what it changed)."""
    from django.core.management import call_command

    call_command("write_snapshot", stdout=io.StringIO())


@pytest.fixture
def patches_dir(tmp_path: Path, settings: Any) -> Path:
    """Both campaign patches, with fixed content, so hashes in payloads are known in advance."""
    folder = tmp_path / "patches"
    folder.mkdir()
    for name, text in PATCH_TEXT.items():
        (folder / name).write_bytes(text)
    settings.PATCHES_DIR = folder
    return folder


@pytest.fixture
def campaign(db: None, patches_dir: Path) -> Any:
    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign

    sync_campaigns(Campaign)
    return Campaign.objects.get(slug="mv-ext-iquants")


@pytest.fixture
def payload_builder() -> Callable[..., dict[str, Any]]:
    return build_payload


class Api:
    """The two signed endpoints over Django's test client (the real URL routing and views)."""

    contributors = "/api/v1/contributors/"
    submissions = "/api/v1/submissions/"

    def __init__(self, client: Any) -> None:
        self.client = client

    def post(self, url: str, body: bytes, **headers: Any) -> Any:
        return self.client.post(url, data=body, content_type="application/json", **headers)

    def register(self, signer: envelope.Signer, handle: str, *vouchers: envelope.Signer) -> Any:
        return self.post(self.contributors, signed_registration(signer, handle, *vouchers))

    def submit(self, payload: Mapping[str, Any], signer: envelope.Signer, **headers: Any) -> Any:
        return self.post(self.submissions, signed_submission(payload, signer), **headers)

    def another_machine(self, owner: envelope.Signer, handle: str, n: int) -> envelope.Signer:
        """The n-th other machine of a contributor: its own key, added to the handle with the
        owner's key vouching (a machine is a key)."""
        signer = persona(f"{handle}-machine-{n}")
        response = self.register(signer, handle, owner)
        assert response.status_code in (200, 201), response.json()
        return signer


@pytest.fixture
def api(client: Any) -> Api:
    """Every test starts with fresh throttle counters (they live in Redis, shared across runs)."""
    from django.core.cache import cache

    cache.clear()
    return Api(client)


@pytest.fixture
def ada(api: Api, campaign: Any, personas: dict[str, envelope.Signer]) -> envelope.Signer:
    """A registered contributor, ready to submit."""
    assert api.register(personas["ada"], "ada").status_code == 201
    return personas["ada"]


def read_csv(text: str) -> list[dict[str, str]]:
    """The data rows of a CSV export, once its last line says it is whole and counts them."""
    import csv

    body, _, last = text.rstrip("\r\n").rpartition("\r\n")
    rows = list(csv.DictReader(io.StringIO(body + "\r\n")))
    assert last == f"# complete: {len(rows)} rows", f"the export is cut or miscounted: {last[:80]!r}"
    return rows
