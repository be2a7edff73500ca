"""The agent's wheel, served by the site it reports to: `build_agent_wheel` builds it from agent/ at
deploy time (the Dockerfile; `prepare_site`, run by make run and the compose web service, when it
is missing or stale), and the home and About pages give the one install line.

The agent depends on the shared rules (protocol/, benchhub-protocol), which no package index holds:
the served wheel vendors them, so one `pipx install URL` installs a working agent."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest
from django.urls import reverse
from django.views.decorators.http import require_safe

AGENT_SOURCE = Path(settings.BASE_DIR) / "agent"
PROTOCOL_SOURCE = Path(settings.BASE_DIR) / "protocol"
PROTOCOL_REQUIREMENT = "Requires-Dist: benchhub-protocol"


def agent_version() -> str:
    """The version in agent/pyproject.toml: the service does not import the agent."""
    return str(tomllib.loads((AGENT_SOURCE / "pyproject.toml").read_text())["project"]["version"])


def wheel_dir() -> Path:
    """Outside static/: a build product, not a source file (settings may name another folder)."""
    return Path(settings.BENCHHUB_AGENT_WHEEL_DIR)


def wheel_name() -> str:
    return f"benchhub_agent-{agent_version()}-py3-none-any.whl"


def _sources() -> list[Path]:
    """What the wheel is built from: the two pyproject.toml files and the packages, not bytecode."""
    found = [AGENT_SOURCE / "pyproject.toml", PROTOCOL_SOURCE / "pyproject.toml"]
    found += [*(AGENT_SOURCE / "benchhub_agent").rglob("*"), *(PROTOCOL_SOURCE / "benchhub_protocol").rglob("*")]
    return [path for path in found if path.is_file() and "__pycache__" not in path.parts]


def is_current() -> bool:
    """This version's wheel exists and is newer than every source file: a container built with
    the wheel (the Dockerfile) starts without building it again, a checkout whose agent changed
    gets a new one (prepare_site)."""
    built = wheel_dir() / wheel_name()
    if not built.is_file():
        return False
    newest = max((path.stat().st_mtime for path in _sources()), default=0.0)
    return built.stat().st_mtime >= newest


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _vendor(agent_wheel: Path, protocol_wheel: Path, target: Path) -> None:
    """The agent's wheel with the protocol package's files added, its requirement on
    benchhub-protocol dropped from METADATA, and RECORD written anew."""
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(agent_wheel) as agent:
        for name in agent.namelist():
            files[name] = agent.read(name)
    protocol_requirements: list[str] = []
    with zipfile.ZipFile(protocol_wheel) as protocol:
        for name in protocol.namelist():
            if name.startswith("benchhub_protocol/"):
                files[name] = protocol.read(name)
            elif name.endswith(".dist-info/METADATA"):
                protocol_requirements = [
                    line
                    for line in protocol.read(name).decode().splitlines(keepends=True)
                    if line.startswith("Requires-Dist:")
                ]
    info = next(name.rsplit("/", 1)[0] for name in files if name.endswith(".dist-info/METADATA"))
    lines = files[f"{info}/METADATA"].decode().splitlines(keepends=True)
    # The protocol's own requirements take the place of the requirement on it.
    at = next(index for index, line in enumerate(lines) if line.startswith(PROTOCOL_REQUIREMENT))
    lines[at : at + 1] = [line for line in protocol_requirements if line not in lines]
    files[f"{info}/METADATA"] = "".join(lines).encode()
    record = f"{info}/RECORD"
    entries = [_record_line(name, data) for name, data in files.items() if name != record]
    files[record] = ("\n".join([*entries, f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name, data in files.items():
            out.writestr(name, data)


def build() -> Path:
    """`pip wheel` of agent/ and protocol/, vendored into one wheel; only this version's kept."""
    target = wheel_dir()
    target.mkdir(parents=True, exist_ok=True)
    built = target / wheel_name()
    with tempfile.TemporaryDirectory() as scratch:
        # Pure-Python wheels for contributors' machines: their Requires-Python is theirs to meet, not the server's.
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--ignore-requires-python"]
        for source in (AGENT_SOURCE, PROTOCOL_SOURCE):
            subprocess.run([*command, str(source), "-w", scratch], check=True)
        agent = Path(scratch) / wheel_name()
        if not agent.is_file():
            raise FileNotFoundError(f"pip built no {agent.name}: is agent/pyproject.toml's version {agent_version()}?")
        protocol = next(Path(scratch).glob("benchhub_protocol-*.whl"))
        _vendor(agent, protocol, built)
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
