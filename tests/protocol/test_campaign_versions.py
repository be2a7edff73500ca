"""benchhub_protocol.campaign_versions and the bundled versions: every runnable (signed) version pins a
commit for every variant and verifies under the bundled campaign keys; a draft is unsigned; the digest
covers every field but the few a server adds per deployment; and what a version changed decides
whether the older cells are superseded."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
from benchhub_protocol import campaign_versions, envelope

from tests.versioning import DEV_CAMPAIGN_KEY

PATCHES = Path(__file__).parents[2] / "patches"


def test_every_runnable_bundled_version_pins_every_variant_and_is_signed_by_a_trusted_key() -> None:
    bundled = campaign_versions.bundled_versions()
    assert set(bundled) == {"mv-ext-iquants", "few-row-mma"}
    trusted = campaign_versions.trusted_keys()
    runnable = 0
    for slug, versions in bundled.items():
        assert [version["version"] for version in versions] == list(range(1, len(versions) + 1)), slug
        for version in versions:
            if version["signature"] is None:  # a draft: never runnable, never served as signed
                assert campaign_versions.unpinned(version), f"{slug} v{version['version']} is pinned: sign it"
                continue
            runnable += 1
            assert campaign_versions.unpinned(version) == [], f"{slug} v{version['version']} has an unpinned variant"
            assert campaign_versions.verify(version, trusted) is not None, f"{slug} v{version['version']}"
            for variant in version["variants"]:
                for patch in variant["patches"]:
                    assert hashlib.sha256((PATCHES / patch["name"]).read_bytes()).hexdigest() == patch["sha256"]
    assert runnable >= 1


def test_a_variant_added_without_a_commit_fails_the_bundled_check() -> None:
    """What the test above would say of a runnable version that gained an unpinned variant."""
    version = copy.deepcopy(campaign_versions.bundled_versions()["mv-ext-iquants"][0])
    version["variants"].append({"name": "pr", "commit": None, "ref": "refs/pull/1/head", "patches": [], "env": {}})
    assert campaign_versions.unpinned(version) == ["pr"]
    assert campaign_versions.verify(version, campaign_versions.trusted_keys()) is None


def test_the_bundled_signatures_are_the_development_keys_and_it_is_the_only_trusted_one() -> None:
    assert campaign_versions.trusted_keys() == {DEV_CAMPAIGN_KEY.keyid: DEV_CAMPAIGN_KEY.public_key}
    version = campaign_versions.bundled_versions()["mv-ext-iquants"][0]
    assert version["signature"] == campaign_versions.sign(version, DEV_CAMPAIGN_KEY)  # Ed25519 is deterministic


def test_the_digest_leaves_out_only_what_a_server_adds_per_deployment() -> None:
    version = campaign_versions.bundled_versions()["mv-ext-iquants"][0]
    served = copy.deepcopy(version)
    served.update(state="open", digest=campaign_versions.digest(version))
    for variant in served["variants"]:
        variant.update(available=True, unavailable_reason="")
        for patch in variant["patches"]:
            patch["url"] = f"https://benchhub.example/patches/{patch['name']}"
    assert campaign_versions.digest(served) == campaign_versions.digest(version)
    assert campaign_versions.verify(served, campaign_versions.trusted_keys()) == DEV_CAMPAIGN_KEY.keyid
    assert campaign_versions.digest({**version, "title": "other"}) != campaign_versions.digest(version)


def test_a_signature_over_another_message_type_never_passes_for_a_campaigns() -> None:
    version = campaign_versions.bundled_versions()["mv-ext-iquants"][0]
    digest = campaign_versions.digest(version)
    raw = DEV_CAMPAIGN_KEY.signing_key.sign(envelope.pae(envelope.SUBMISSION_TYPE, digest.encode())).signature
    forged = {**version, "signature": envelope.b64encode(raw)}
    assert campaign_versions.verify(forged, campaign_versions.trusted_keys()) is None


@pytest.mark.parametrize(
    ("change", "superseded"),
    [
        (lambda m: m["variants"][1].update(commit="a" * 40), True),
        (lambda m: m["variants"][2]["env"].update(GGML_METAL_MV_IQ2_XXS_VEC="0"), True),
        (lambda m: m["variants"][1]["patches"][0].update(sha256="b" * 64), True),
        (lambda m: m["sweep"].update(npp=256), True),
        (lambda m: m.update(min_effect=0.05), False),
        (lambda m: m.update(plausible_ratio=[0.25, 4.0]), False),
        (lambda m: m.update(title="a better title"), False),
    ],
)
def test_only_a_change_of_what_is_measured_supersedes_the_older_cells(change: object, superseded: bool) -> None:
    first = campaign_versions.bundled_versions()["mv-ext-iquants"][0]
    second = copy.deepcopy(first)
    change(second)  # type: ignore[operator]
    second["version"] = 2
    third = {**copy.deepcopy(second), "version": 3, "min_effect": 0.03}
    assert campaign_versions.measured_from([first, second, third]) == (
        {1: 1, 2: 2, 3: 2} if superseded else {1: 1, 2: 1, 3: 1}
    )
    assert campaign_versions.changes(first, second)  # every change is named
