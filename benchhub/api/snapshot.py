"""The public snapshot: every raw envelope with the campaigns (every version of each, with the
rules the service judges it by), the contributors' keys with their registration times, and the decisions the payloads
cannot show (hidden, withdrawn, held and why), as gzipped JSON lines, so that anyone can verify
every signature and recompute every cell (scripts/recompute_cells.py). The line format is in
docs/recompute.md.

It is published as a file: `publish` writes it under a temporary name in the snapshot directory,
fsyncs and renames it, then replaces the small JSON index beside it that names the file with its
sha256, size, time and submission count; the view serves the file the index names. The newest
KEEP files stay, so a download that began before a newer one appeared is not cut."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

from benchhub_protocol.envelope import b64encode
from django.conf import settings
from django.utils import timezone

from benchhub.accounts.models import Contributor
from benchhub.results import claims
from benchhub.results.campaigns import campaign_rules, headline_sizes
from benchhub.results.cells import predict_cycles
from benchhub.results.models import Campaign, Submission

CELLS_VERSION = 4
CHUNK = 1000
INDEX = "index.json"
PREFIX = "benchhub-snapshot-"
PUBLIC = 0o644  # a temporary file is private; nginx (another user) sends the published ones
KEEP = 2  # the newest files kept: the latest and the one before it, for downloads still running


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def rules(definition: dict[str, Any]) -> dict[str, Any]:
    """What the service reads of a campaign version's manifest to judge its cells (docs/protocol.md section 7)."""
    found = campaign_rules(definition)
    return {
        "min_effect": found.min_effect,
        "plausible_ratio": list(found.plausible_ratio),
        "patched_backends": sorted(found.patched_backends),
        "headline_sizes": headline_sizes(definition),
        "predict_cycles": predict_cycles(definition),
    }


def versions(campaign: Campaign) -> list[dict[str, Any]]:
    """Every version of the campaign, oldest first: the recompute judges each submission by its own."""
    return [
        {
            "version": version.version,
            "digest": version.digest,
            "state": version.state,
            "signature": version.signature or None,
            "published_at": version.published_at.isoformat() if version.published_at else None,
            "manifest": version.manifest,
            "rules": rules(version.manifest),
        }
        for version in campaign.versions.order_by("version")
    ]


def state(submission: Submission) -> str:
    """hidden (by a moderator), withdrawn (by its contributor), held (quarantine not released, or a
    model claim in conflict) or counted: the first that applies, in the order the cells apply them."""
    if submission.hidden:
        return "hidden"
    if submission.withdrawn_at is not None:
        return "withdrawn"
    return "held" if submission.held_back else "counted"


def records(manifest_of: Callable[[Campaign], dict[str, Any]], generated_at: datetime) -> Iterator[dict[str, Any]]:
    """The snapshot's records, read in chunks so memory stays flat: the submissions received up to
    `generated_at`, whose keys are all among the contributors' read after it."""
    yield {
        "kind": "snapshot",
        "generated_at": generated_at.isoformat(),
        "cells_version": CELLS_VERSION,
        "key_probation_s": settings.BENCHHUB_KEY_PROBATION_S,
    }
    for campaign in Campaign.objects.order_by("slug"):
        yield {
            "kind": "campaign",
            "manifest": manifest_of(campaign),
            "rules": rules(campaign.definition),
            "versions": versions(campaign),
        }
    for contributor in Contributor.objects.order_by("pk").prefetch_related("keys"):
        keys = [
            {
                "keyid": key.keyid,
                "public_key": b64encode(bytes(key.public_key)),
                "registered_at": key.created_at.isoformat(),
            }
            for key in contributor.keys.all()
        ]
        yield {"kind": "contributor", "handle": contributor.handle, "keys": keys}
    for sha256, name, quant in claims.shown_names():
        yield {"kind": "model_name", "sha256": sha256, "name": name, "quant": quant}
    submissions = Submission.objects.filter(received_at__lte=generated_at).order_by("received_at", "pk")
    for submission in submissions.select_related("raw", "contributor").iterator(chunk_size=CHUNK):
        yield {
            "kind": "submission",
            "id": str(submission.id),
            "received_at": submission.received_at.isoformat(),
            "contributor": submission.contributor.handle,
            "envelope": bytes(submission.raw.body).decode("utf-8"),
            "state": state(submission),
            "held": submission.held_back,
            "reason": submission.state_reason,
            "withdrawn_at": submission.withdrawn_at.isoformat() if submission.withdrawn_at else None,
            "withdrawal": bytes(submission.withdrawal).decode("utf-8") if submission.withdrawal else None,
        }


def gzipped(lines: Iterator[bytes]) -> Iterator[bytes]:
    """A gzip stream of the lines, in the pieces the compressor hands out."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for line in lines:
        piece = compressor.compress(line)
        if piece:
            yield piece
    yield compressor.flush()


class Index(TypedDict):
    """The JSON beside the snapshot files that names the latest one (GET /api/v1/snapshot/index/)."""

    file: str
    sha256: str
    size_bytes: int
    generated_at: str
    submissions: int


def write_file(file: Any, manifest_of: Callable[[Campaign], dict[str, Any]], generated_at: datetime) -> Index:
    """The gzipped snapshot into an open binary file, flushed to the disk; returns what the index says
    of it (its `file` left empty)."""
    digest, size, submissions = hashlib.sha256(), 0, 0

    def lines() -> Iterator[bytes]:
        nonlocal submissions
        for record in records(manifest_of, generated_at):
            submissions += record["kind"] == "submission"
            yield _line(record)

    for piece in gzipped(lines()):
        file.write(piece)
        digest.update(piece)
        size += len(piece)
    file.flush()
    os.fsync(file.fileno())
    return Index(
        file="",
        sha256=digest.hexdigest(),
        size_bytes=size,
        generated_at=generated_at.isoformat(),
        submissions=submissions,
    )


def publish(
    directory: Path, manifest_of: Callable[[Campaign], dict[str, Any]], *, only_if_missing: bool = False
) -> Index | None:
    """Write a new snapshot file and point the index at it; None when another writer holds the
    directory's lock (its snapshot is as new as this one would be) or, with only_if_missing, when one
    is published already. Whatever fails mid-way leaves the index and the files it names as they
    were, and no partial file under a snapshot's name."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if only_if_missing and latest(directory) is not None:
            return None
        for stale in directory.glob(".partial-*"):  # left by a writer that died; none runs now
            stale.unlink(missing_ok=True)
        generated_at = timezone.now()
        name = f"{PREFIX}{generated_at:%Y%m%dT%H%M%S%fZ}.jsonl.gz"
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".partial-", delete=False) as partial:
            try:
                index = write_file(partial, manifest_of, generated_at)
            except BaseException:
                Path(partial.name).unlink()
                raise
        os.chmod(partial.name, PUBLIC)
        os.utime(partial.name, (generated_at.timestamp(), generated_at.timestamp()))  # its Last-Modified
        os.replace(partial.name, directory / name)
        index["file"] = name
        _replace(directory / INDEX, json.dumps(index, indent=1).encode() + b"\n")
        _fsync_directory(directory)
        for old in sorted(directory.glob(f"{PREFIX}*.jsonl.gz"), reverse=True)[KEEP:]:
            old.unlink(missing_ok=True)
        return index


def latest(directory: Path) -> Index | None:
    """The index of the newest published snapshot, or None before the first."""
    try:
        index: Index = json.loads((directory / INDEX).read_bytes())
    except FileNotFoundError:
        return None
    return index


def _replace(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".partial-", delete=False) as partial:
        partial.write(data)
        partial.flush()
        os.fsync(partial.fileno())
    os.chmod(partial.name, PUBLIC)
    os.replace(partial.name, path)


def _fsync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
