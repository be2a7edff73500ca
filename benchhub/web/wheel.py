"""The agent's wheel, served by the site it reports to: `build_agent_wheel` builds it from agent/
(the Dockerfile, at image build time), `prepare_site` builds it when it is missing or older than
agent/ (make run, the compose stack's web service), and the home and About pages give the one
install line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchhub_agent import __version__
from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest
from django.urls import reverse
from django.views.decorators.http import require_safe

AGENT_SOURCE = Path(settings.BASE_DIR) / "agent"


def wheel_dir() -> Path:
    """Outside static/: a build product, not a source file (settings may name another folder)."""
    return Path(settings.BENCHHUB_AGENT_WHEEL_DIR)


def wheel_name() -> str:
    # The installed agent is the one the server imports, so its metadata is the wheel's version.
    return f"benchhub_agent-{__version__}-py3-none-any.whl"


def _sources() -> list[Path]:
    """What the wheel is built from: pyproject.toml and the package, not build products or bytecode."""
    package = AGENT_SOURCE / "benchhub_agent"
    found = [AGENT_SOURCE / "pyproject.toml", *package.rglob("*")]
    return [path for path in found if path.is_file() and "__pycache__" not in path.parts]


def is_current() -> bool:
    """This version's wheel exists and is newer than every source file: a container built with
    the wheel (the Dockerfile) starts without building it again, a checkout whose agent changed
    gets a new one."""
    built = wheel_dir() / wheel_name()
    if not built.is_file():
        return False
    newest = max((path.stat().st_mtime for path in _sources()), default=0.0)
    return built.stat().st_mtime >= newest


def build() -> Path:
    """`pip wheel` from agent/, then only this version's wheel kept in the folder."""
    target = wheel_dir()
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(AGENT_SOURCE), "-w", str(target)],
        check=True,
    )
    built = target / wheel_name()
    if not built.is_file():
        raise FileNotFoundError(f"pip built no {built.name}: is agent/pyproject.toml's version {__version__}?")
    for other in target.glob("benchhub_agent-*.whl"):
        if other != built:
            other.unlink()
    return built


def install_line(request: HttpRequest) -> str:
    return f"pipx install {request.build_absolute_uri(reverse('agent-wheel', args=[wheel_name()]))}"


@require_safe
def download(request: HttpRequest, filename: str) -> FileResponse:
    path = wheel_dir() / wheel_name()
    if filename != wheel_name() or not path.is_file():
        raise Http404("No such agent wheel: the site serves the version it runs.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=filename, content_type="application/zip")
