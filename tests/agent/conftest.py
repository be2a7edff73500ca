from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _read_fixture(name: str) -> str:
    path = FIXTURES / name
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


@pytest.fixture
def recorded() -> Callable[[str], str]:
    """Reads a recorded tool output from tests/agent/fixtures/ (a .gz is decompressed)."""
    return _read_fixture


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test touches the real home directory: every file of the agent goes under tmp_path."""
    home = tmp_path / "benchhub-home"
    monkeypatch.setenv("BENCHHUB_HOME", str(home))
    monkeypatch.delenv("BENCHHUB_SERVER", raising=False)
    yield home
