"""The rules for public names (issue 30, point 6): a handle is exactly the `[A-Za-z0-9-]` of
docs/protocol.md section 3 and reads as no other handle; a chip name is printable ASCII and owns
its URL slug.

Handles: Python's `$` matches before a trailing newline, so the pattern is applied with
`fullmatch`. Two handles collide when they are equal under case folding and Unicode TR39
confusable skeletons (ICU's SpoofChecker): `ada` and `ADA`, `lab` and `Iab` and `1ab`, `mary` and
`rnary`, `foo` and `f00`.

Chips: the first spelling stored owns its slug (`ChipName`); a later spelling with the same slug
("APPLE M2 PRO" after "Apple M2 Pro") is refused with 400 naming the spelling to use, so a
`/chips/<slug>/` page and the API's chip filter always mean one chip. A name whose slug ends like
a GPU binning (`-20c`) is refused too: it would take the slug of another chip's binning page.
"""

from __future__ import annotations

import re
import threading
import unicodedata

import icu
from benchhub_protocol.schema import HANDLE_PATTERN
from django.utils.text import slugify

from benchhub.accounts.errors import IngestError
from benchhub.accounts.models import ChipName
from benchhub.rows import get_or_insert

_local = threading.local()


def _skeleton(text: str) -> str:
    checker = getattr(_local, "checker", None)
    if checker is None:  # one per thread: ICU objects are not documented as thread-safe
        checker = _local.checker = icu.SpoofChecker()
    return str(checker.getSkeleton(0, text))


def handle_key(handle: str) -> str:
    """What two handles that read alike share. Skeleton first, so a capital I meets an l before
    case folding makes it an i; then case folding, then the skeleton of the folded text."""
    return _skeleton(_skeleton(handle).casefold())


def check_handle(handle: str) -> None:
    if not re.fullmatch(HANDLE_PATTERN.removeprefix("^").removesuffix("$"), handle):
        raise IngestError(
            400, "schema_violation", "handle: 1-39 of A-Z, a-z, 0-9 and '-', not starting with '-'.", "handle"
        )


BINNING_SUFFIX = re.compile(r"-\d+c\Z")


def chip_slug(name: str) -> str:
    return slugify(name)


def check_chip_text(name: str) -> str:
    """The chip name's slug, once the name is NFKC, printable ASCII and has a slug of its own."""
    field = "machine.chip"
    if unicodedata.normalize("NFKC", name) != name or not all(" " <= char <= "~" for char in name):
        raise IngestError(400, "chip_name", "machine.chip: only printable ASCII after NFKC normalisation.", field)
    slug = chip_slug(name)
    if not slug or BINNING_SUFFIX.search(slug):
        raise IngestError(
            400, "chip_name", f"machine.chip: {name!r} has no URL slug of its own (or ends like a binning).", field
        )
    return slug


def claim_chip(name: str) -> None:
    """Called in the ingest transaction: the chip's spelling owns its slug from the first stored
    submission on; a different spelling of a claimed slug is refused with 400."""
    slug = check_chip_text(name)
    owner = get_or_insert(ChipName, {"slug": slug}, {"name": name}).name  # a concurrent first claim waits
    if owner != name:
        raise IngestError(
            400,
            "chip_name_taken",
            f"machine.chip: {name!r} has the URL slug of the chip {owner!r}; report it as {owner!r}.",
            "machine.chip",
        )
