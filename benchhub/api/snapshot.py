"""The public snapshot: every raw envelope with the campaigns (and the rules the service judges
them by), the contributors' keys with their registration times, and the decisions the payloads
cannot show (hidden, withdrawn, held and why), as gzipped JSON lines, so that anyone can verify
every signature and recompute every cell (scripts/recompute_cells.py). The line format is in
docs/recompute.md."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from benchhub_protocol.envelope import b64encode
from django.conf import settings
from django.utils import timezone

from benchhub.accounts.models import Contributor
from benchhub.results.campaigns import campaign_rules, headline_sizes
from benchhub.results.models import Campaign, Submission

CELLS_VERSION = 3
CHUNK = 1000


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def rules(campaign: Campaign) -> dict[str, Any]:
    """What the service reads of a campaign's definition to judge its cells (docs/protocol.md section 7)."""
    found = campaign_rules(campaign.definition)
    return {
        "min_effect": found.min_effect,
        "plausible_ratio": list(found.plausible_ratio),
        "patched_backends": sorted(found.patched_backends),
        "headline_sizes": headline_sizes(campaign.definition),
    }


def state(submission: Submission) -> str:
    """hidden (by a moderator), withdrawn (by its contributor), held (quarantine not released, or a
    model claim in conflict) or counted: the first that applies, in the order the cells apply them."""
    if submission.hidden:
        return "hidden"
    if submission.withdrawn_at is not None:
        return "withdrawn"
    return "held" if submission.held_back else "counted"


def records(manifest_of: Callable[[Campaign], dict[str, Any]]) -> Iterator[bytes]:
    """The snapshot's lines, uncompressed, read in chunks so memory stays flat."""
    yield _line(
        {
            "kind": "snapshot",
            "generated_at": timezone.now().isoformat(),
            "cells_version": CELLS_VERSION,
            "key_probation_s": settings.BENCHHUB_KEY_PROBATION_S,
        }
    )
    for campaign in Campaign.objects.order_by("slug"):
        yield _line({"kind": "campaign", "manifest": manifest_of(campaign), "rules": rules(campaign)})
    for contributor in Contributor.objects.order_by("pk").prefetch_related("keys"):
        keys = [
            {
                "keyid": key.keyid,
                "public_key": b64encode(bytes(key.public_key)),
                "registered_at": key.created_at.isoformat(),
            }
            for key in contributor.keys.all()
        ]
        yield _line({"kind": "contributor", "handle": contributor.handle, "keys": keys})
    submissions = Submission.objects.order_by("received_at", "pk").select_related("raw", "contributor")
    for submission in submissions.iterator(chunk_size=CHUNK):
        yield _line(
            {
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
        )


def gzipped(lines: Iterator[bytes]) -> Iterator[bytes]:
    """A gzip stream of the lines, flushed in pieces of about 64 kB."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    pending = 0
    for line in lines:
        piece = compressor.compress(line)
        pending += len(line)
        if piece:
            yield piece
        if pending > 65536:
            yield compressor.flush(zlib.Z_SYNC_FLUSH)
            pending = 0
    yield compressor.flush()
