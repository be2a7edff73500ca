"""Install from the site: `build_agent_wheel` builds the agent's wheel from agent/, the site serves it
at the URL the About and home pages give, and it installs into a fresh virtualenv (pip from the URL:
pipx is not on the test machines) with one version everywhere."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import benchhub_agent
import pytest
from django.core.management import call_command

from benchhub.results.models import Campaign
from benchhub.web import wheel


@pytest.fixture
def built(tmp_path: Path, settings: Any) -> Path:
    settings.BENCHHUB_AGENT_WHEEL_DIR = tmp_path / "served"
    call_command("build_agent_wheel", stdout=StringIO())
    return Path(settings.BENCHHUB_AGENT_WHEEL_DIR) / wheel.wheel_name()


def test_it_installs_the_served_wheel_into_a_fresh_virtualenv(
    built: Path, live_server: Any, live_campaign: Campaign, client: Any, tmp_path: Path
) -> None:
    assert built.name == f"benchhub_agent-{benchhub_agent.__version__}-py3-none-any.whl"
    home = client.get("/").content.decode()
    url = f"{live_server.url}/agent/{built.name}"
    assert f"pipx install http://testserver/agent/{built.name}" in home

    target = tmp_path / "fresh"
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    # Any Python 3.11 or newer, as the pages say (issue 44: this machine's 3.11.7 once could not install
    # it): one plain install, dependencies resolved for this Python, as the site's install line does.
    with zipfile.ZipFile(built) as archive:
        metadata = archive.read(f"benchhub_agent-{benchhub_agent.__version__}.dist-info/METADATA").decode()
    assert "Requires-Python: >=3.11\n" in metadata
    subprocess.run([python, "-m", "pip", "install", "--quiet", url], check=True, timeout=600)
    shown = subprocess.run([target / "bin" / "benchhub-agent", "--version"], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == f"benchhub-agent, version {benchhub_agent.__version__}"
    payload_version = subprocess.run(
        [python, "-c", "from benchhub_agent import result; print(result.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert payload_version.stdout.strip() == benchhub_agent.__version__  # what result.py writes as agent.version
    assert sys.prefix != str(target)


def test_it_serves_only_the_version_it_runs(built: Path, client: Any) -> None:
    assert client.get(f"/agent/{built.name}").status_code == 200
    assert client.get("/agent/benchhub_agent-0.0.1-py3-none-any.whl").status_code == 404
