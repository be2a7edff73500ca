"""The restore drill (issue 46; docs/reliability.md, restoring the service): a service holding --size
submissions of every kind (two campaigns, four signed campaign versions, withdrawals, hidden rows, a
retired key, quarantined rows held and released, model claims in conflict, keys on probation, a
control page), its public snapshot, a fresh database restored from that file by `manage.py
restore_snapshot`, then both served by gunicorn side by side:

1. the restored service's own snapshot against the original's, record for record;
2. `scripts/recompute_cells.py --server` against the restored service (0 cells may differ);
3. the same pages fetched from both (leaderboards, group, chip, campaign, contributor and submission
   pages, the API's JSON), normalised only where two services must differ (`normalised`).

    python -m bench drill --size 10000

Its databases are bh_perf_drill_<size>_original and bh_perf_drill_<size>_restored, dropped and made
again on each run. The state is built in process: most submissions as bench/state.py writes them
(batches of the rows `ingest_submission` stores), every one whose kind needs the service's own
decisions (other campaign versions, quarantine, claims, probation, a control page) through
`ingest_submission` itself, then withdrawals, hides, releases and a retirement as the service makes
them. No Redis: Celery tasks run in process, each service caches in its own memory.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOST = "postgres://postgres@127.0.0.1:5432"
STATIC_ROOT = ROOT / "bench" / "results" / "static"
PROBATION_S = 86400  # as deployed: the probation keys stay pending through the drill
PERSONA_BASE = 200_000  # the drill's keys, apart from the state's and the ingest bench's
BATCH = 250
DISPUTED_MODEL = ("Qwen3-1.7B", "qwen3", 1720574976)
PR_COMMITS = ("1" * 40, "2" * 40)  # few-row-mma's PR branch, pinned by versions 2 and 3
MASTER = "836d57176dc699a726c55418e4f96b8ca628e1bf"
CUDA = {
    "os": "Linux",
    "arch": "x86_64",
    "chip": "AMD Ryzen 9 7950X",
    "gpu_name": "NVIDIA GeForce RTX 4090",
    "gpu_cores": None,
    "backend": "cuda",
    "low_power_mode": None,
}
NOT_CARRIED = ("keys_banned", "claims_pinned")
# Pages fetched from both services, at most this many of each kind (the first met while following links).
PAGE_CAPS = {
    "home": 80,
    "chip": 200,
    "campaign": 10,
    "contributor": 40,
    "submission": 60,
    "envelope": 10,
    "compare": 20,
    "api": 60,
    "csv": 6,
}


# ================================================================ the original state (runs with Django set up)


@dataclass
class Plan:
    """How many of each kind for a drill of `size` submissions (shares of the size, with a floor)."""

    size: int

    def share(self, fraction: float, floor: int) -> int:
        return max(floor, round(self.size * fraction))

    @property
    def keys(self) -> int:
        return self.share(0.06, 30)

    @property
    def few_row(self) -> int:  # per version of few-row-mma
        return self.share(0.01, 8)

    @property
    def quarantined(self) -> int:
        return self.share(0.004, 6)

    @property
    def probation_keys(self) -> int:
        return self.share(0.002, 3)

    @property
    def probation_rows(self) -> int:
        return self.share(0.006, 6)

    @property
    def control(self) -> int:
        return self.share(0.002, 4)

    @property
    def withdrawn(self) -> int:
        return self.share(0.015, 6)

    @property
    def hidden(self) -> int:
        return self.share(0.015, 6)


def _now_text() -> str:
    """Now, rounded up to the second the payload writes: after a version published a moment ago."""
    from django.utils import timezone

    return (timezone.now() + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sign_version(slug: str, change: Any) -> Any:
    """The campaign's next version with `change` applied, signed with the development campaign key (its
    seed is public, docs/campaigns.md) and published as `manage.py publish_campaign_version` does."""
    import copy
    import hashlib

    from benchhub_protocol import campaign_versions, envelope

    from benchhub.results import versions
    from benchhub.results.models import CampaignVersion

    newest = CampaignVersion.objects.filter(campaign__slug=slug).order_by("-version").first()
    assert newest is not None
    manifest = copy.deepcopy(newest.manifest)
    change(manifest)
    manifest["version"] = newest.version + 1
    signer = envelope.Signer.from_seed(hashlib.sha256(b"benchhub-dev-campaign-key").digest())
    return versions.publish({**manifest, "signature": campaign_versions.sign(manifest, signer)})


def _pin(commit: str) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        for variant in manifest["variants"]:
            if variant["name"] == "pr-29869":
                variant["commit"] = commit

    return change


def _stricter(manifest: dict[str, Any]) -> None:
    manifest["min_effect"] = 0.03  # a rule, not what is measured: the cells stay those of version 1


class Drill:
    """The original service's state, built in the database Django is set up with."""

    def __init__(self, plan: Plan, seed: int) -> None:
        from bench import payloads

        self.plan, self.rng = plan, random.Random(seed)
        self.signers: dict[str, Any] = {}  # keyid -> Signer
        self.ids: Counter[str] = Counter()
        self.specs = {slug: self._variants(slug) for slug in ("mv-ext-iquants", "few-row-mma")}
        self.payloads = payloads

    def _variants(self, slug: str) -> list[Any]:
        from bench import payloads
        from benchhub.results.models import Campaign

        return payloads.campaign_variants(Campaign.objects.get(slug=slug).definition)

    def keys(self, count: int, *, start: int, established: bool) -> list[Any]:
        """`count` keys, a few contributors with several (a machine is a key); established keys were
        registered two probations ago."""
        from django.utils import timezone

        from bench import payloads
        from benchhub.accounts.models import Contributor, PublicKey

        signers = [payloads.persona(PERSONA_BASE + start + index) for index in range(count)]
        owners: list[Any] = []
        for index in range(count):
            if index % 7 == 3 and owners:  # every seventh key is another machine of the previous contributor
                owners.append(owners[-1])
            else:
                owners.append(Contributor.objects.create(handle=f"drill-{start + index}"))
        registered = timezone.now() - (timedelta(seconds=2 * PROBATION_S) if established else timedelta(0))
        keys = PublicKey.objects.bulk_create(
            PublicKey(keyid=signer.keyid, public_key=signer.public_key, contributor=owner)
            for signer, owner in zip(signers, owners, strict=True)
        )
        PublicKey.objects.filter(pk__in=[key.pk for key in keys]).update(created_at=registered)
        self.signers.update({signer.keyid: signer for signer in signers})
        return list(PublicKey.objects.select_related("contributor").filter(pk__in=[key.pk for key in keys]))

    def payload(self, slug: str = "mv-ext-iquants", *, now: bool = True) -> dict[str, Any]:
        """A realistic payload (bench/payloads.py); created now (judged by the version open now), or
        at the payloads' fixed time, before any version this drill publishes."""
        content = self.payloads.payload(self.rng, self.specs[slug])
        content["campaign"] = slug
        if now:
            content["created_at"] = _now_text()
        return content

    def few_row(self, commit: str, digest: str | None) -> dict[str, Any]:
        content = self.payload("few-row-mma")
        content["sweep"].update(npp=512, ntg=32, n_ctx=32768, extra_args=["-pps"])
        commits = {"master-836d571": MASTER, "pr-29869": commit}
        for variant in content["variants"]:
            variant["commit"] = commits[variant["name"]]
        if digest is not None:
            content["campaign_digest"] = digest
        return content

    def ingest(self, key: Any, content: dict[str, Any], kind: str) -> str:
        """Through the service's own ingest, in process (cells refreshed as the worker would)."""
        from benchhub_protocol.payloads import signed_submission

        from benchhub.results import ingest

        result = ingest.ingest_submission(signed_submission(content, self.signers[key.keyid]))
        assert result.created, result
        self.ids[kind] += 1
        return result.id

    def bulk(self, keys: list[Any], count: int, *, now: bool) -> None:
        """Rows as bench/state.py writes them, each judged by the campaign version it ran under."""
        from benchhub_protocol.payloads import signed_submission

        writer = versioned_writer()
        written = 0
        while written < count:
            batch = []
            for _ in range(min(BATCH, count - written)):
                key = self.rng.choice(keys)
                content = self.payload(now=now)
                batch.append((key, content, signed_submission(content, self.signers[key.keyid])))
            writer.write(batch)
            written += len(batch)
        self.ids["bulk"] += written

    def build(self) -> dict[str, int]:
        from django.contrib.auth.models import AnonymousUser
        from django.db import connection

        from benchhub.accounts.models import PublicKey
        from benchhub.results import cells, claims, ingest, moderation, tasks
        from benchhub.results.models import Submission

        plan = self.plan
        crowd = self.keys(plan.keys, start=0, established=True)
        special = 2 * plan.few_row + plan.quarantined + plan.probation_rows + plan.control + 2 * len(crowd[:6]) + 9
        first_half = (plan.size - special) // 2
        self.bulk(crowd, first_half, now=False)  # judged by mv-ext-iquants version 1
        _sign_version("mv-ext-iquants", _stricter)  # version 2: another min_effect, the same cells
        self.bulk(crowd, plan.size - special - first_half, now=True)

        # few-row-mma: version 2 pins one commit of the PR, version 3 another (2's cells superseded).
        # Version 2's rows name its digest; version 3's are judged by the version open when created.
        version = _sign_version("few-row-mma", _pin(PR_COMMITS[0]))
        for _ in range(plan.few_row):
            self.ingest(self.rng.choice(crowd), self.few_row(PR_COMMITS[0], version.digest), "few_row_v2")
        _sign_version("few-row-mma", _pin(PR_COMMITS[1]))
        for _ in range(plan.few_row):
            self.ingest(self.rng.choice(crowd), self.few_row(PR_COMMITS[1], None), "few_row_v3")

        # Quarantine: a ratio far beyond the campaign's plausible range; a third released by a moderator.
        quarantined = []
        for _ in range(plan.quarantined):
            content = self.payload()
            for run in content["sweep"]["runs"]:
                if run["variant"] != "upstream":
                    for row in run["rows"]:
                        row["tg_tps"] = round(row["tg_tps"] * 5, 2) + 0.01
            quarantined.append(self.ingest(self.rng.choice(crowd), content, "quarantined"))
        released = Submission.objects.filter(pk__in=quarantined[: max(1, len(quarantined) // 3)])
        moderation.set_released(released, True, AnonymousUser(), "checked by hand")

        # Model claims: five established machines say one thing about a file, two later ones another
        # (held); on a second file one machine each, the first to stand keeps it (the other held).
        name, architecture, n_params = DISPUTED_MODEL
        true_facts = self.payloads.model_facts(name, architecture, n_params, "IQ2_XS")
        true_facts["sha256"] = "d" * 64
        other_facts = {**self.payloads.model_facts(name, architecture, n_params, "IQ3_S"), "sha256": "d" * 64}
        for key in crowd[:5]:
            self.ingest(key, {**self.payload(), "model": true_facts}, "claim_standing")
        for key in crowd[5:7]:
            self.ingest(key, {**self.payload(), "model": other_facts}, "claim_held")
        second = {**true_facts, "sha256": "c" * 64}
        self.ingest(crowd[7], {**self.payload(), "model": second}, "claim_standing")
        self.ingest(crowd[8], {**self.payload(), "model": {**other_facts, "sha256": "c" * 64}}, "claim_held")
        for sha256 in ("d" * 64, "c" * 64):
            tasks.settle_claims(sha256)

        # A control page: CUDA rows on a Metal campaign, from several machines.
        for index in range(plan.control):
            content = self.payload()
            content["machine"] = {**content["machine"], **CUDA}
            for check in content["correctness"]:
                check["backend"] = "CUDA0"
            self.ingest(crowd[index % 6], content, "control")

        # Keys on probation: stored and shown, counted only in n_pending.
        newcomers = self.keys(plan.probation_keys, start=plan.keys, established=False)
        for index in range(plan.probation_rows):
            self.ingest(newcomers[index % len(newcomers)], self.payload(), "probation")
        # Two rows per machine of six crowd keys, so that withdrawals and hides reach ingested rows too.
        for key in crowd[:6]:
            for _ in range(2):
                self.ingest(key, self.payload(), "crowd_ingested")

        # Withdrawals (signed by each row's own key), hides, and one key retired with all its rows.
        from benchhub_protocol.payloads import signed_withdrawal

        visible = list(
            Submission.objects.filter(hidden=False, withdrawn_at__isnull=True)
            .order_by("pk")
            .values_list("pk", "key__keyid")
        )
        chosen = self.rng.sample(visible, plan.withdrawn + plan.hidden)
        for pk, keyid in chosen[: plan.withdrawn]:
            ingest.withdraw_submission(str(pk), signed_withdrawal(str(pk), self.signers[keyid]))
        moderation.set_hidden(
            Submission.objects.filter(pk__in=[pk for pk, _ in chosen[plan.withdrawn :]]), True, AnonymousUser(), "spam"
        )
        retired = crowd[-1]
        moderation.retire_keys(PublicKey.objects.filter(pk=retired.pk), AnonymousUser(), "Sybil burst")

        for sha256 in claims.disputed_files():
            tasks.settle_claims(sha256)
        cells.refresh_all_cells()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        return counts()


def versioned_writer() -> Any:
    """bench/state.py's Writer, each row judged by the campaign version open at its created_at (as
    ingest judges it), its chip's spelling claimed as ingest claims it (Django must be set up first)."""
    from bench.state import Writer
    from benchhub.accounts import names
    from benchhub.results import ingest, versions

    class Versioned(Writer):
        def submission(self, key: Any, payload: dict[str, Any], body: bytes) -> Any:
            row = super().submission(key, payload, body)
            version = versions.version_for(self.campaign, payload, ingest.created_at_of(payload["created_at"]))
            row.ran_under, row.campaign_version = version, version.measured_from
            names.claim_chip(payload["machine"]["chip"])
            return row

    return Versioned()


def counts() -> dict[str, int]:
    """Rows of each kind in the database Django is set up with."""
    from benchhub.accounts.models import Contributor, PublicKey
    from benchhub.results.flags import QUARANTINED
    from benchhub.results.models import CampaignVersion, LeaderboardCell, ModelClaimDecision, Submission

    submissions = Submission.objects.all()
    return {
        "submissions": submissions.count(),
        "contributors": Contributor.objects.count(),
        "keys": PublicKey.objects.count(),
        "keys_banned": PublicKey.objects.filter(banned=True).count(),
        "campaign_versions_signed": CampaignVersion.objects.exclude(signature="").count(),
        "few_row_mma": submissions.filter(campaign__slug="few-row-mma").count(),
        "withdrawn": submissions.filter(withdrawn_at__isnull=False).count(),
        "hidden": submissions.filter(hidden=True).count(),
        "quarantined": submissions.filter(flags__contains=[QUARANTINED]).count(),
        "released": submissions.filter(released=True).count(),
        "model_held": submissions.filter(model_held=True).count(),
        "claims_pinned": ModelClaimDecision.objects.count(),
        "control": submissions.filter(backend="cuda").count(),
        "probation": submissions.filter(key__created_at__gt=_probation_start()).count(),
        "cells": LeaderboardCell.objects.count(),
    }


def _probation_start() -> Any:
    from django.utils import timezone

    return timezone.now() - timedelta(seconds=PROBATION_S)


# ================================================================ the drill (no Django in this process)


def environment(database_url: str, snapshot_dir: Path) -> dict[str, str]:
    """DEBUG off as deployed, no Redis (tasks in process, a cache per process), throttles lifted."""
    from bench.stack import service_env

    env = service_env(database_url, "")
    env.pop("REDIS_URL")
    env.update(
        DJANGO_SETTINGS_MODULE="benchhub.settings",
        DJANGO_DEBUG="0",
        DJANGO_STATIC_ROOT=str(STATIC_ROOT),
        BENCHHUB_SNAPSHOT_DIR=str(snapshot_dir),
        BENCHHUB_KEY_PROBATION_S=str(PROBATION_S),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "protocol"), str(ROOT / "agent")]),
    )
    return env


def fresh_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(env: dict[str, str], *arguments: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *arguments], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(arguments)} failed:\n{result.stdout[-2000:]}{result.stderr[-4000:]}")
    return result.stdout


def snapshot_file(directory: Path) -> Path:
    index = json.loads((directory / "index.json").read_text())
    return directory / index["file"]


def snapshot_records(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def snapshot_differences(original: Path, restored: Path) -> tuple[int, list[str]]:
    """Records compared, and how the restored service's snapshot differs from the original's; only the
    header's generated_at and each campaign version's published_at may (`normalised_record`)."""
    mine, theirs = snapshot_records(original), snapshot_records(restored)
    lines = []
    if len(mine) != len(theirs):
        lines.append(f"{len(mine)} records in the original's snapshot, {len(theirs)} in the restored one's")
    for number, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        a, b = normalised_record(a), normalised_record(b)
        if a != b:
            fields = sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))
            lines.append(f"record {number} ({a.get('kind')} {a.get('id', '')}): {fields} differ")
    return len(mine), lines


def normalised_record(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("kind") == "snapshot":
        return {**record, "generated_at": None}
    return record


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "href" and value and value.startswith("/") and not value.startswith("//"):
                self.found.append(value.split("#", 1)[0])


def kind_of(url: str) -> str | None:
    """Which kind of page a same-site link is, or None for what the drill does not compare (static
    files, the admin, the agent's wheel, the snapshot itself, the API's docs)."""
    path = urllib.parse.urlsplit(url).path
    if path == "/":
        return "home"
    if path.startswith(("/static/", "/admin/", "/agent/", "/api/v1/snapshot", "/api/v1/docs", "/api/v1/schema")):
        return None
    if path.endswith(".csv"):
        # An export of every row takes longer than a worker may (issue 46, point 1: not the restore's
        # matter); a filtered one is compared.
        return "csv" if urllib.parse.urlsplit(url).query else None
    if path.startswith("/api/"):
        return "api"
    if path.endswith("envelope.json"):
        return "envelope"
    for kind in ("chip", "campaign", "contributor", "submission", "compare"):
        if path.startswith(f"/{kind}s/") or path == f"/{kind}/":
            return kind
    return None


CSRF = re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]*"')
NONCE = re.compile(r'(nonce=")[^"]*"')


def normalised(body: bytes, content_type: str, base: str) -> str:
    """What must differ between two services removed: their base URL, CSRF tokens and CSP nonces in
    HTML; JSON is compared as data, its keys sorted; a CSV's rows as a set (see below)."""
    text = body.decode("utf-8", errors="replace").replace(base, "BASE")
    if "csv" in content_type:  # ordered by an internal row id, which the order of insertion decides
        header, *rows = text.splitlines()
        return "\n".join([header, *sorted(rows)])
    if "json" in content_type:
        try:
            return json.dumps(json.loads(text), sort_keys=True, indent=0)
        except ValueError:
            return text
    return NONCE.sub(r'\1"', CSRF.sub(r'\1"', text))


def get(base: str, url: str) -> tuple[int, str, bytes]:
    """Status, content type and body; a response that fails mid-way is status 0 with the error."""
    try:
        try:
            with urllib.request.urlopen(base + url, timeout=120) as response:
                return response.status, response.headers.get("Content-Type", ""), response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Content-Type", ""), error.read()
    except OSError as error:
        return 0, "text/plain", f"{type(error).__name__}: {error}".encode()


@dataclass
class PageComparison:
    compared: Counter[str] = field(default_factory=Counter)
    differing: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)


def compare_pages(original: str, restored: str, seeds: list[str], caps: dict[str, int]) -> PageComparison:
    """Follow the original's same-site links from `seeds` (breadth first, `caps` of each kind) and
    fetch each page from both services."""
    found = PageComparison()
    queue, seen = list(seeds), set(seeds)
    while queue:
        url = queue.pop(0)
        kind = kind_of(url)
        if kind is None or found.compared[kind] >= caps[kind]:
            continue
        status, content_type, body = get(original, url)
        other_status, other_type, other_body = get(restored, url)
        found.compared[kind] += 1
        found.statuses[status] += 1
        a, b = normalised(body, content_type, original), normalised(other_body, other_type, restored)
        if (status, a) != (other_status, b):
            found.differing.append(f"{url}: {first_difference(status, a, other_status, b)}")
        if sum(found.compared.values()) % 50 == 0:
            say(f"pages: {dict(found.compared)}, {len(found.differing)} differ")
        if "html" in content_type:
            parser = Links()
            parser.feed(body.decode("utf-8", errors="replace"))
            links = parser.found
        elif "json" in content_type:
            links = json_links(body, original)
        else:
            links = []
        for link in links:
            if link not in seen and kind_of(link) is not None:
                seen.add(link)
                queue.append(link)
    return found


def json_links(body: bytes, base: str) -> list[str]:
    """The API's own links (next pages, submissions) in a JSON body, as paths."""
    text = body.decode("utf-8", errors="replace")
    return [match.removeprefix(base) for match in re.findall(re.escape(base) + r'/api/v1/[^"\s]*', text)][:20]


def first_difference(status: int, a: str, other_status: int, b: str) -> str:
    if status != other_status:
        return f"status {status} here, {other_status} restored"
    where = next((index for index, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"original …{a[max(0, where - 80) : where + 80]!r}… restored …{b[max(0, where - 80) : where + 80]!r}…"


@dataclass
class Figures:
    counts: dict[str, int]
    restored_counts: dict[str, int]
    seconds: dict[str, float]
    snapshot_records: int
    snapshot_differences: list[str]
    cells: int
    cells_differing: int
    recompute_output: str
    original_cells_differing: int
    original_recompute_output: str
    pages: dict[str, int]
    page_statuses: dict[int, int]
    pages_differing: list[str]

    @property
    def counts_agree(self) -> bool:
        """Every count but the bans and the pins (docs/reliability.md: bans are not carried; a
        conflict's standing claim is pinned by the restore) is the original's."""
        return all(
            self.restored_counts.get(name) == value for name, value in self.counts.items() if name not in NOT_CARRIED
        )

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{name} {value}" for name, value in self.counts.items())
        return [
            f"original: {kinds}",
            "restored: " + ", ".join(f"{name} {value}" for name, value in self.restored_counts.items()),
            f"counts the snapshot carries agree: {self.counts_agree}",
            f"snapshot records compared: {self.snapshot_records}, differing: {len(self.snapshot_differences)}",
            *self.snapshot_differences[:20],
            f"recompute_cells.py --server (restored): {self.cells} cells, {self.cells_differing} differ; "
            f"against the original: {self.original_cells_differing} differ",
            f"pages compared: {sum(self.pages.values())} ({', '.join(f'{k} {v}' for k, v in self.pages.items())}; "
            f"statuses {dict(self.page_statuses)}), differing: {len(self.pages_differing)}",
            *self.pages_differing[:20],
            "seconds: " + ", ".join(f"{name} {value:.1f}" for name, value in self.seconds.items()),
        ]


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def state_counts(env: dict[str, str]) -> dict[str, int]:
    found = subprocess.run(
        [sys.executable, "-m", "bench.drill", "counts"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    counted: dict[str, int] = json.loads(found.stdout.strip().splitlines()[-1])
    return counted


def run(
    original_url: str,
    restored_url: str,
    size: int,
    seed: int,
    workdir: Path,
    caps: dict[str, int] = PAGE_CAPS,
    reuse: bool = False,
) -> Figures:
    """The drill; `reuse`: the two databases of an earlier run (--keep) compared again, not rebuilt."""
    from bench.stack import Stack

    seconds: dict[str, float] = {}
    original_dir, restored_dir = workdir / "original", workdir / "restored"
    original_env, restored_env = environment(original_url, original_dir), environment(restored_url, restored_dir)

    if not reuse:
        started = time.perf_counter()
        fresh_database(original_url)
        manage(original_env, "migrate", "--noinput", "-v0")
        seconds["migrate"] = time.perf_counter() - started
        started = time.perf_counter()
        built = subprocess.run(
            [sys.executable, "-m", "bench.drill", "build", "--size", str(size), "--seed", str(seed)],
            cwd=ROOT,
            env=original_env,
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            raise RuntimeError(f"building the state failed:\n{built.stderr[-4000:]}")
        seconds["build"] = time.perf_counter() - started
        say(f"built in {seconds['build']:.0f} s")
    if not (STATIC_ROOT / "staticfiles.json").exists():
        manage(original_env, "collectstatic", "--noinput", "-v0")
    original_counts = state_counts(original_env)
    say(f"original: {original_counts}")

    started = time.perf_counter()
    manage(original_env, "write_snapshot")
    snapshot = snapshot_file(original_dir)
    seconds["snapshot"] = time.perf_counter() - started

    if not reuse:
        started = time.perf_counter()
        fresh_database(restored_url)
        manage(restored_env, "migrate", "--noinput", "-v0")
        say(manage(restored_env, "restore_snapshot", str(snapshot)).strip())
        seconds["restore"] = time.perf_counter() - started
    restored_counts = state_counts(restored_env)
    say(f"restored: {restored_counts}")

    started = time.perf_counter()
    manage(restored_env, "write_snapshot")
    records, differences = snapshot_differences(snapshot, snapshot_file(restored_dir))
    seconds["snapshots compared"] = time.perf_counter() - started
    say(f"snapshots: {records} records, {len(differences)} differ")

    stacks = [Stack(env, web_workers=1, worker_concurrency=1) for env in (original_env, restored_env)]
    for stack in stacks:
        stack.commands = {"web": stack.commands["web"]}  # no worker or beat: nothing changes while compared
    try:
        for stack in stacks:
            stack.start()
        original, restored = (stack.base for stack in stacks)
        started = time.perf_counter()
        cells, differ, output = recompute_against(restored)
        seconds["recompute_cells --server"] = time.perf_counter() - started
        # The same script against the original: a cell that differs on both is no loss of the restore's.
        say(f"recompute_cells --server (restored): {cells} cells, {differ} differ")
        _, original_differ, original_output = recompute_against(original)
        say(f"recompute_cells --server (original): {original_differ} differ")

        started = time.perf_counter()
        pages = compare_pages(original, restored, seeds(snapshot), caps)
        seconds["pages compared"] = time.perf_counter() - started
    finally:
        for stack in stacks:
            stack.stop()
    return Figures(
        counts=original_counts,
        restored_counts=restored_counts,
        seconds=seconds,
        snapshot_records=records,
        snapshot_differences=differences,
        cells=cells,
        cells_differing=differ,
        recompute_output=output[-3000:],
        original_cells_differing=original_differ,
        original_recompute_output=original_output[-3000:],
        pages=dict(pages.compared),
        page_statuses=dict(pages.statuses),
        pages_differing=pages.differing,
    )


def recompute_against(server: str) -> tuple[int, int, str]:
    """`scripts/recompute_cells.py --server`: cells compared, cells differing (-1: no summary), its output."""
    found = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "recompute_cells.py"), "--server", server],
        capture_output=True,
        text=True,
    )
    output = found.stdout.strip() + found.stderr.strip()
    summary = re.search(r"(\d+) cells, (\d+) differ", output)
    return (int(summary[1]), int(summary[2]), output) if summary else (0, -1, output)


def seeds(snapshot: Path) -> list[str]:
    """Where the comparison starts: every campaign's leaderboard (site and API) and its board of each
    model, its versions, a few chips' CSV exports, the submission lists, and a few submissions of
    every state (a hidden one is a 404 on both)."""
    records = snapshot_records(snapshot)
    slugs = [record["manifest"]["slug"] for record in records if record["kind"] == "campaign"]
    pages = ["/", "/compare/", "/api/v1/campaigns/", "/api/v1/submissions/?page_size=100"]
    for slug in slugs:
        pages += [
            f"/?campaign={slug}",
            f"/campaigns/{slug}/",
            f"/api/v1/leaderboard/?campaign={slug}",
            f"/api/v1/campaigns/{slug}/versions/",
        ]
    models: set[tuple[str, str]] = set()
    chips_seen: set[tuple[str, str]] = set()
    for record in records:
        if record["kind"] == "submission":
            payload = json.loads(base64.b64decode(json.loads(record["envelope"])["payload"]))
            models.add((payload["campaign"], payload["model"]["sha256"]))
            chips_seen.add((payload["campaign"], payload["machine"]["chip"]))
    pages += [f"/?campaign={slug}&model={sha256}" for slug, sha256 in sorted(models)]  # each campaign's model boards
    chips = sorted({(slug, chip) for slug, chip in chips_seen})[:: max(1, len(chips_seen) // 4)]
    pages += [f"/api/v1/measurements.csv?{urllib.parse.urlencode({'campaign': s, 'chip': c})}" for s, c in chips]
    by_state: dict[str, list[str]] = {}
    for record in records:
        if record["kind"] == "submission":
            by_state.setdefault(record["state"], []).append(record["id"])
    for ids in by_state.values():
        for pk in ids[:4]:
            pages += [f"/submissions/{pk}/", f"/api/v1/submissions/{pk}/"]
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench drill", description=__doc__)
    parser.add_argument("step", nargs="?", choices=("all", "build", "counts"), default="all")
    parser.add_argument("--size", type=int, default=10_000, help="submissions in the original service")
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--keep", action="store_true", help="leave the two databases in place")
    parser.add_argument("--reuse", action="store_true", help="compare the databases an earlier --keep left")
    options = parser.parse_args(argv)
    if options.step in ("build", "counts"):  # a process of its own, on the DATABASE_URL it was given
        import django

        django.setup()
        from benchhub.results.campaigns import sync_campaigns
        from benchhub.results.models import Campaign

        if options.step == "build":
            sync_campaigns(Campaign)
            print(json.dumps(Drill(Plan(options.size), options.seed).build()))
        else:
            print(json.dumps(counts()))
        return 0
    name = f"bh_perf_drill_{options.size}"
    original, restored = f"{HOST}/{name}_original", f"{HOST}/{name}_restored"
    with tempfile.TemporaryDirectory(prefix="benchhub-drill-") as workdir:
        figures = run(original, restored, options.size, options.seed, Path(workdir), reuse=options.reuse)
    if not options.keep and not options.reuse:
        drop_database(original)
        drop_database(restored)
    for line in figures.lines():
        print(line)
    clean = not figures.snapshot_differences and figures.cells_differing == 0 and not figures.pages_differing
    if figures.cells_differing:
        print(figures.recompute_output[-1500:])
    if figures.original_cells_differing:
        print("against the original:", figures.original_recompute_output[-1500:])
    return 0 if clean and figures.counts_agree else 1


if __name__ == "__main__":
    sys.exit(main())
