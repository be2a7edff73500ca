"""Where every file of the agent lives, decided in one place, and the atomic-write helper."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "benchhub"


@dataclass(frozen=True)
class Dirs:
    config: Path  # keys and the registration record: small, private, worth backing up
    cache: Path  # source trees, builds, hashes: large, rebuildable
    data: Path  # results and the outbox: what the user produced

    @property
    def keys(self) -> Path:
        return self.config / "keys"

    @property
    def outbox(self) -> Path:
        return self.data / "outbox"

    @property
    def results(self) -> Path:
        return self.data / "results"

    @property
    def sources(self) -> Path:
        return self.cache / "src"

    @property
    def builds(self) -> Path:
        return self.cache / "build"

    @property
    def binaries(self) -> Path:
        return self.cache / "bin"

    @property
    def hashes(self) -> Path:
        return self.cache / "sha256.json"

    def as_dict(self) -> dict[str, Path]:
        names = ("config", "cache", "data", "keys", "outbox", "results", "sources", "builds", "binaries")
        return {name: getattr(self, name) for name in names}


def home() -> Dirs:
    """`BENCHHUB_HOME` holds everything when set (tests, CI, portable installs); else the platform's dirs."""
    override = os.environ.get("BENCHHUB_HOME")
    if override:
        root = Path(override).expanduser().resolve()
        return Dirs(config=root / "config", cache=root / "cache", data=root / "data")
    return Dirs(
        config=Path(platformdirs.user_config_dir(APP_NAME)),
        cache=Path(platformdirs.user_cache_dir(APP_NAME)),
        data=Path(platformdirs.user_data_dir(APP_NAME)),
    )


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write via a temporary file in the same folder, fsync, then rename: readers (and a Ctrl-C) never see
    half a file. The mode is set on the temporary file before any byte is written, so a key is never
    readable by others, not even for an instant."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
