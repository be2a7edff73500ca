from pathlib import Path
from typing import Any

from benchhub_protocol import campaign_versions
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results import signing


class Command(BaseCommand):
    help = (
        "Offline, on the moderator's machine: resolve a variant's ref (a pull request's branch) once, show the commit "
        "and its date, and write the next version pinned to it, signed with --key. Publish the file with "
        "publish_campaign_version; a later head of the branch is a later version."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version_file", type=Path, help="the version to start from (e.g. the draft)")
        parser.add_argument("variant")
        parser.add_argument("--key", type=Path, required=True, help="the campaign key's file")
        parser.add_argument("--out", type=Path, required=True, help="where to write the new version")
        parser.add_argument("--repo", help="where to resolve the ref (default: the version's repo)")

    def handle(self, *args: Any, version_file: Path, variant: str, key: Path, out: Path, **options: Any) -> None:
        try:
            manifest = signing.read_version(version_file)
            signer = signing.load_key(key)
            entry = next((v for v in manifest["variants"] if v["name"] == variant), None)
            if entry is None or not entry.get("ref"):
                raise signing.SigningError(f"Variant {variant!r} of {manifest['slug']} follows no ref.")
            commit, date = signing.resolve_ref(options["repo"] or manifest["repo"], entry["ref"])
            self.stdout.write(f"{entry['ref']} is at {commit}, committed {date}.")
            signed = signing.sign(signing.pinned(manifest, variant, commit, date), signer)
            signing.write_version(out, signed)
        except signing.SigningError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"Wrote {signed['slug']} version {signed['version']} to {out}, signed: digest "
            f"{campaign_versions.digest(signed)}."
        )
