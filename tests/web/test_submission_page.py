"""The submission page: every fact of one signed result, and a verification anyone can rerun."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from benchhub.results.models import Submission
from benchhub.web import demo

from .helpers import IQ2, M1, ingest_runs, page_text

pytestmark = pytest.mark.django_db


def test_it_shows_machine_model_build_sweep_checks_and_signer(
    client: Client, small_site: list[Submission], django_assert_max_num_queries: Any
) -> None:
    submission = small_site[2]  # M1, IQ2_XXS, 01+02 failed its correctness check
    with django_assert_max_num_queries(12):
        text = page_text(client.get(reverse("submission", args=[submission.pk])))
    assert "Apple M1" in text and "8 cores" in text and "16.0\xa0GB" in text
    assert "Qwen3-1.7B-UD-IQ2_XXS.gguf" in text
    assert '<script id="quant-mix" type="application/json">' in text
    assert '<th scope="row">IQ2_XXS</th><td class="num">482,000,000</td><td class="num">68.4%</td>' in text
    variant = submission.variants.get(name="01+02")
    assert variant.commit[:12] in text
    assert variant.patches[1]["sha256"][:16] in text
    assert "GGML_METAL_MV_IQ2_XXS_VEC=1" in text
    assert '<th scope="col" class="num">rep 2</th>' in text
    assert text.count('<th scope="row">01+02</th><td class="num">') == 9  # one line per batch size
    assert "correctness failed" in text
    assert '<span class="badge fail">fail</span>' in text
    assert "61 / 2" in text
    assert submission.key.keyid in text
    assert "Demo submission." in text
    assert '<span class="badge flag">correctness_failed</span>' in text


def test_it_serves_the_stored_envelope_byte_for_byte(client: Client, small_site: list[Submission]) -> None:
    submission = small_site[0]
    response = client.get(reverse("submission-envelope", args=[submission.pk]))
    assert response.status_code == 200
    assert response.content == bytes(submission.raw.body)
    assert response["Content-Type"] == "application/json"
    assert "attachment" in response["Content-Disposition"]


def test_it_hides_a_hidden_submission(client: Client, small_site: list[Submission]) -> None:
    submission = small_site[0]
    Submission.objects.filter(pk=submission.pk).update(hidden=True)
    assert client.get(reverse("submission", args=[submission.pk])).status_code == 404
    assert client.get(reverse("submission-envelope", args=[submission.pk])).status_code == 404


def test_it_answers_404_for_an_unknown_submission(client: Client, small_site: list[Submission]) -> None:
    assert client.get("/submissions/00000000-0000-0000-0000-000000000000/").status_code == 404


def _verify_command(page: str) -> str:
    block = re.search(r"<pre><code>(.*?)</code></pre>", page, re.S)
    assert block is not None
    return html.unescape(block.group(1))


def _run(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # python3 must be one with PyNaCl, as the page tells its reader to install.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": path},
    )


@pytest.mark.django_db(transaction=True)
def test_it_gives_a_copy_paste_command_that_verifies_the_signature_independently(
    live_server: Any, live_campaign: Any, tmp_path: Path
) -> None:
    [submission] = ingest_runs(live_campaign, [demo.DemoRun("demo-ada", M1, IQ2, 0, demo.Trouble())])
    with urllib.request.urlopen(live_server.url + reverse("submission", args=[submission.pk])) as response:
        command = _verify_command(response.read().decode())
    assert live_server.url in command

    verified = _run(command, tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert f"signature OK, keyid {submission.key.keyid} payload sha256 {submission.payload_sha256}" in verified.stdout

    # The same command refuses an envelope whose signature belongs to another key.
    other = demo.signer_for("demo-bashir").public_key_b64
    refused = _run(command.replace(demo.signer_for("demo-ada").public_key_b64, other), tmp_path)
    assert refused.returncode != 0
