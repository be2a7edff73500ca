"""Issue 42's reproduction, fixed: an edited campaign cannot change a version that results reference;
the change is published as a new signed version instead, each result stays judged by the version it
ran under (at ingest and after rederive_measurements), and the public recompute agrees with the
service on every cell of a state with submissions under both versions."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import campaign_versions
from django.core.management import CommandError, call_command

from benchhub.results.models import CampaignVersion, Submission
from tests import versioning
from tests.conftest import Api, build_payload, persona, publish_snapshot
from tests.recompute.builder import load_script

TG = {"upstream": {2: [100.0, 101.0], 4: [90.0, 91.0]}, "01": {2: [120.0, 121.0], 4: [99.0, 100.0]}}


def _submit_three(api: Api, npp: int, digest: str | None, salt: float) -> None:
    for n, handle in enumerate(("ada", "bob", "cole")):
        tg = {
            name: {bs: [v + salt + n / 10 for v in values] for bs, values in sizes.items()}
            for name, sizes in TG.items()
        }
        payload = build_payload(tg=tg)
        payload["sweep"]["npp"] = npp
        if digest:
            payload["campaign_digest"] = digest
        response = api.submit(payload, persona(handle))
        assert response.status_code == 201 and response.json()["status"] == "accepted", response.json()


SHIPPED = campaign_versions.bundled_versions


def _edited_v1(npp: int, sign: bool) -> dict[str, list[dict[str, Any]]]:
    bundled = SHIPPED()
    edited = copy.deepcopy(bundled["mv-ext-iquants"][0])
    edited["sweep"]["npp"] = npp
    if sign:
        edited["signature"] = campaign_versions.sign(edited, versioning.DEV_CAMPAIGN_KEY)
    return {**bundled, "mv-ext-iquants": [edited]}


@pytest.mark.django_db(transaction=True)
def test_an_edit_is_refused_and_a_new_version_keeps_every_cell_checkable(
    api: Api, campaign: Any, live_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    for handle in ("ada", "bob", "cole"):
        assert api.register(persona(handle), handle).status_code == 201
    _submit_three(api, 128, None, 0.0)
    v1_digest = CampaignVersion.objects.get(campaign=campaign, version=1).digest

    # The edit of the issue: npp 128 -> 256 in the bundled file of a version three results ran under.
    for signed, why in ((False, "signature does not verify"), (True, r"referenced by 3 submission\(s\)")):
        monkeypatch.setattr(campaign_versions, "bundled_versions", lambda signed=signed: _edited_v1(256, signed))
        with pytest.raises(CommandError, match=why) as refused:
            call_command("sync_campaigns", stdout=io.StringIO())
    assert "make version 2 instead" in str(refused.value) and "publish_campaign_version" in str(refused.value)
    monkeypatch.undo()
    assert CampaignVersion.objects.get(campaign=campaign, version=1).manifest["sweep"]["npp"] == 128

    # The same change as version 2: signed offline, published.
    version_file = tmp_path / "v2.json"
    version_file.write_text(json.dumps(versioning.next_version("mv-ext-iquants", lambda m: m["sweep"].update(npp=256))))
    out = io.StringIO()
    call_command("publish_campaign_version", str(version_file), stdout=out)
    assert "version 2 (open)" in out.getvalue() and "sweep.npp: 128 -> 256" in out.getvalue()
    v2 = CampaignVersion.objects.get(campaign=campaign, version=2)
    _submit_three(api, 256, v2.digest, 5.0)

    call_command("rederive_measurements", stdout=io.StringIO())
    assert (
        sorted(Submission.objects.values_list("campaign_version", "status"))
        == [(1, "accepted")] * 3 + [(2, "accepted")] * 3
    )
    publish_snapshot()
    script = load_script()
    listed = script.parse_snapshot(script.download_snapshot(live_server.url)).versions["mv-ext-iquants"]
    assert [(v.number, v.digest, v.cells) for v in listed] == [(1, v1_digest, 1), (2, v2.digest, 2)]
    assert script.main(["--server", live_server.url]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(" cells, 0 differ")
    rows = api.client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants"}).json()["rows"]
    assert {(r["campaign_version"], r["superseded"], r["n_machines"]) for r in rows} == {(1, True, 3), (2, False, 3)}
