"""Campaign versions in the database (docs/campaigns.md): the bundled ones synced, a signed one
published, every version's state settled, and the version a submission is judged by.

A version is immutable once a submission references it: `sync` refuses to change it and says how to
make a new one. States: a version without a signature is a draft; of the signed ones the newest is
open (or closed, once a moderator closes the campaign) and the older ones are superseded. Versions
that measure the same thing (campaign_versions.measured) share cells: each version's `measured_from`
is the version those cells are numbered by.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from benchhub_protocol import campaign_versions
from django.db import transaction
from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from benchhub.accounts.errors import IngestError
from benchhub.results.models import Campaign, CampaignVersion, Headline, LeaderboardCell

State = CampaignVersion.State


class CampaignRefused(Exception):
    """A version that may not be synced or published, in one sentence."""


def how_to_change(slug: str, number: int) -> str:
    return (
        f"make version {number + 1} instead: copy it to campaigns/{slug}/v{number + 1}.json, change it there, "
        f"sign it offline with `manage.py sign_campaign_version`, then `manage.py publish_campaign_version`"
    )


def _verified(manifest: dict[str, Any]) -> str:
    """The manifest's signature, checked under the trusted campaign keys ('' for a draft)."""
    signature = manifest.get("signature") or ""
    if signature and campaign_versions.verify(manifest, campaign_versions.trusted_keys()) is None:
        raise CampaignRefused(
            f"Campaign {manifest['slug']} version {manifest['version']}: its signature does not verify under a "
            "trusted campaign key."
        )
    if signature and campaign_versions.unpinned(manifest):
        raise CampaignRefused(
            f"Campaign {manifest['slug']} version {manifest['version']} is signed but variant "
            f"{campaign_versions.unpinned(manifest)[0]} names no commit: only a draft may, pin it first."
        )
    return str(signature)


def _body(manifest: dict[str, Any]) -> dict[str, Any]:
    return campaign_versions.signed_body(manifest)


def sync(campaign_model: Any, version_model: Any = None) -> int:
    """Create or update the bundled versions; idempotent. Takes the models so that a data migration can
    pass its historical ones. Raises CampaignRefused for a changed version that a submission references."""
    version_model = version_model or CampaignVersion
    bundled = campaign_versions.bundled_versions()
    for slug, manifests in bundled.items():
        latest = manifests[-1]
        campaign, _ = campaign_model.objects.get_or_create(
            slug=slug,
            defaults={
                "title": latest["title"],
                "description": latest.get("description", ""),
                "repo": latest["repo"],
                "baseline": latest["baseline"],
                "definition": _body(latest),
            },
        )
        for manifest in manifests:
            signature = _verified(manifest)
            digest = campaign_versions.digest(manifest)
            row = version_model.objects.filter(campaign=campaign, version=manifest["version"]).first()
            opened = parse_datetime(manifest.get("opened_at") or "") if signature else None
            fields = {"manifest": _body(manifest), "digest": digest, "signature": signature}
            if row is None:
                version_model.objects.create(
                    campaign=campaign,
                    version=manifest["version"],
                    state=State.OPEN if signature else State.DRAFT,
                    measured_from=manifest["version"],
                    published_at=(opened or timezone.now()) if signature else None,
                    **fields,
                )
            elif row.digest != digest:
                if row.submissions.exists():
                    raise CampaignRefused(
                        f"Campaign {slug} version {row.version} is referenced by {row.submissions.count()} "
                        f"submission(s), so its manifest cannot change: {how_to_change(slug, row.version)}."
                    )
                version_model.objects.filter(pk=row.pk).update(
                    published_at=row.published_at or ((opened or timezone.now()) if signature else None), **fields
                )
        settle(campaign, version_model)
        if version_model is CampaignVersion:  # a data migration's historical models have no cells to mark
            mark_superseded(campaign.pk)
    return len(bundled)


def settle(campaign: Any, version_model: Any = None) -> None:
    """Every version's state, measured_from and changes, and the campaign row's copy of the current
    version (the newest signed one, else the newest draft)."""
    version_model = version_model or CampaignVersion
    rows = list(version_model.objects.filter(campaign=campaign).order_by("version"))
    published = [row for row in rows if row.signature]
    closed = bool(published) and published[-1].state == State.CLOSED
    measured = campaign_versions.measured_from([row.manifest for row in published])
    previous: Any = None
    for row in rows:
        if not row.signature:
            state = State.DRAFT
        elif row is published[-1]:
            state = State.CLOSED if closed else State.OPEN
        else:
            state = State.SUPERSEDED
        changes = campaign_versions.changes(previous.manifest, row.manifest) if previous is not None else []
        version_model.objects.filter(pk=row.pk).update(
            state=state, measured_from=measured.get(row.version, row.version), changes=changes
        )
        previous = row
    current = (published or rows)[-1].manifest
    campaign_model = type(campaign)
    campaign_model.objects.filter(pk=campaign.pk).update(
        title=current["title"],
        description=current.get("description", ""),
        repo=current["repo"],
        baseline=current["baseline"],
        definition=current,
    )


def _signed(campaign_id: int) -> QuerySet[CampaignVersion]:
    """The campaign's signed versions, newest first."""
    return CampaignVersion.objects.filter(campaign_id=campaign_id).exclude(signature="").order_by("-version")


def current(campaign_id: int) -> CampaignVersion | None:
    """The version new results run under: the newest signed one (open, or closed)."""
    return _signed(campaign_id).first()


def current_cells(campaign_id: int) -> int:
    """The campaign_version of the cells that are not superseded (every refresh asks: its manifest is not read)."""
    found = _signed(campaign_id).values_list("measured_from", flat=True).first()
    return found if found is not None else 1


def rules_manifest(campaign_id: int, measured_from: int) -> dict[str, Any]:
    """The manifest whose rules judge the cells numbered `measured_from`: the newest version among them."""
    found = _signed(campaign_id).filter(measured_from=measured_from).values_list("manifest", flat=True).first()
    if found is None:
        return dict(Campaign.objects.only("definition").get(pk=campaign_id).definition)
    return dict(found)


def mark_superseded(campaign_id: int) -> None:
    """Cells and headlines of versions before the current measurement are superseded (one UPDATE each)."""
    live = current_cells(campaign_id)
    flag = Case(When(campaign_version=live, then=Value(False)), default=Value(True))
    LeaderboardCell.objects.filter(campaign_id=campaign_id).update(superseded=flag)
    Headline.objects.filter(campaign_id=campaign_id).update(superseded=flag)


def version_for(campaign: Campaign, payload: dict[str, Any], created_at: datetime) -> CampaignVersion:
    """The version a payload is judged by: the one its `campaign_digest` names, else the one open at
    its created_at (docs/protocol.md, campaign versions); IngestError when there is none to run under,
    or the campaign is closed."""
    # Every signed version in one query (a campaign has a handful): the newest says whether it is closed.
    signed = list(CampaignVersion.objects.filter(campaign=campaign).exclude(signature="").order_by("version"))
    newest = signed[-1] if signed else None
    if newest is not None and newest.state == State.CLOSED:
        raise IngestError(400, "campaign_closed", f"Campaign {campaign.slug} takes no more results.", "campaign")
    named = payload.get("campaign_digest")
    if named is not None:
        found = CampaignVersion.objects.filter(campaign=campaign, digest=named).first()
        if found is None or not found.signature:
            raise IngestError(
                400,
                "unknown_campaign_version",
                f"No published version of {campaign.slug} has digest {named}.",
                "campaign_digest",
            )
        return found
    opened = [row for row in signed if row.published_at is None or row.published_at <= created_at]
    found = opened[-1] if opened else newest and signed[0]
    if found is None:
        raise IngestError(
            400, "campaign_not_open", f"Campaign {campaign.slug} has no published version yet.", "campaign"
        )
    return found


def judged_by(submission: Any) -> dict[str, Any]:
    """The manifest a stored submission is judged by."""
    if submission.ran_under_id is None:
        return dict(submission.campaign.definition)
    return dict(submission.ran_under.manifest)


@transaction.atomic
def publish(manifest: dict[str, Any]) -> CampaignVersion:
    """A signed version, checked and made the open one; the older versions' cells are marked superseded
    where it changes what is measured. The cells themselves are refreshed by the caller's queue."""
    slug = manifest.get("slug")
    campaign = Campaign.objects.select_for_update().filter(slug=slug).first()
    if campaign is None:
        raise CampaignRefused(f"No campaign {slug!r}: a new campaign ships as version 1 in the bundled versions.")
    if not manifest.get("signature"):
        raise CampaignRefused(
            f"Campaign {slug} version {manifest.get('version')} is not signed: sign it offline first."
        )
    signature = _verified(manifest)
    newest = CampaignVersion.objects.filter(campaign=campaign).order_by("-version").first()
    number = manifest.get("version")
    expected = newest.version + 1 if newest is not None else 1
    if number != expected:
        raise CampaignRefused(f"Campaign {slug} is at version {expected - 1}: the next version is {expected}.")
    CampaignVersion.objects.create(
        campaign=campaign,
        version=number,
        state=State.OPEN,
        measured_from=number,
        manifest=_body(manifest),
        digest=campaign_versions.digest(manifest),
        signature=signature,
        published_at=timezone.now(),
    )
    settle(campaign)
    mark_superseded(campaign.pk)
    return CampaignVersion.objects.get(campaign=campaign, version=number)


def close(slug: str) -> CampaignVersion:
    """The campaign takes no more results: its newest signed version becomes closed."""
    found = CampaignVersion.objects.filter(campaign__slug=slug).exclude(signature="").order_by("-version").first()
    if found is None:
        raise CampaignRefused(f"Campaign {slug!r} has no published version to close.")
    CampaignVersion.objects.filter(pk=found.pk).update(state=State.CLOSED)
    found.refresh_from_db()
    return found
