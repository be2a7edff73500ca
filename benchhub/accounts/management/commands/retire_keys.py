"""Retire keys in one audited action: one key, every key of a handle, or every key registered from
one network in a time window (docs/reliability.md, "Threat model"). The admin offers the same on
the keys' and contributors' lists."""

from __future__ import annotations

import ipaddress
from datetime import UTC
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from benchhub.accounts.models import PublicKey
from benchhub.results import moderation


class Command(BaseCommand):
    help = "Retire keys (banned, their submissions hidden, their cells recomputed), with an audit line each."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--keyid", help="one key")
        which.add_argument("--handle", help="every key of this contributor")
        which.add_argument("--network", help="every key registered from inside this CIDR network")
        parser.add_argument("--since", help="with --network: registered at or after (ISO 8601, UTC)")
        parser.add_argument("--until", help="with --network: registered before (ISO 8601, UTC)")
        parser.add_argument("--reason", required=True, help="why, for the audit trail")
        parser.add_argument("--actor", required=True, help="the moderator's username")
        parser.add_argument("--dry-run", action="store_true", help="list the keys, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = User.objects.filter(username=options["actor"]).first()
        if actor is None:
            raise CommandError(f"No user {options['actor']!r}.")
        keys = self._keys(options)
        if not keys:
            raise CommandError("No key matches.")
        for key in keys:
            self.stdout.write(
                f"{key.keyid} {key.contributor.handle} {key.registered_network} {key.created_at:%Y-%m-%dT%H:%M}Z"
            )
        if options["dry_run"]:
            return
        retired, hidden = moderation.retire_keys(keys, actor, options["reason"])
        self.stdout.write(f"Retired {retired} key(s); hid {hidden} submission(s); their cells are being recomputed.")

    def _keys(self, options: dict[str, Any]) -> list[PublicKey]:
        found = PublicKey.objects.select_related("contributor")
        if options["keyid"]:
            return list(found.filter(keyid=options["keyid"]))
        if options["handle"]:
            return list(found.filter(contributor__handle__iexact=options["handle"]))
        since, until = parse_datetime(options["since"] or ""), parse_datetime(options["until"] or "")
        if since is None or until is None:
            raise CommandError("--network needs --since and --until (ISO 8601, e.g. 2026-12-04T05:00Z).")
        since, until = (moment if moment.tzinfo else moment.replace(tzinfo=UTC) for moment in (since, until))
        try:
            ipaddress.ip_network(options["network"], strict=False)
        except ValueError:
            raise CommandError(f"{options['network']!r} is not a network (e.g. 203.0.113.0/24).") from None
        return moderation.keys_from_network(options["network"], since, until)
