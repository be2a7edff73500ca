"""Networks that keys registered from (PublicKey.registered_network: an IPv4 /24 or IPv6 /64 as
CIDR text), matched as networks: what a moderator retires keys by and searches for."""

from __future__ import annotations

import ipaddress
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_OCTETS = 4


def search_network(term: str) -> Network | None:
    """The network a search term names: an address, a CIDR, or the leading octets of an IPv4 network
    ("10.1.1" is 10.1.1.0/24, "10.1" is 10.1.0.0/16); None for anything else (a handle, a keyid)."""
    text = term.strip()
    if not text:
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    parts = text.rstrip(".").split(".")
    if not 1 <= len(parts) < _OCTETS or not all(part.isdigit() and int(part) <= 255 for part in parts):
        return None
    padded = ".".join(parts + ["0"] * (_OCTETS - len(parts)))
    return ipaddress.ip_network(f"{padded}/{8 * len(parts)}", strict=False)


def inside(recorded: str, wanted: Network) -> bool:
    """Whether a recorded network lies inside `wanted` (or is it)."""
    try:
        network = ipaddress.ip_network(recorded)
    except ValueError:
        return False
    return network.version == wanted.version and network.subnet_of(wanted)  # type: ignore[arg-type]


def keys_inside(queryset: Any, wanted: Network) -> list[Any]:
    """The pks of the keys in `queryset` registered from inside `wanted`. The text prefix of an IPv4
    network's leading whole octets narrows the rows read; the match itself is by network."""
    rows = queryset.exclude(registered_network="")
    if wanted.version == 4 and wanted.prefixlen >= 8:
        octets = str(wanted.network_address).split(".")[: wanted.prefixlen // 8]
        rows = rows.filter(registered_network__startswith=".".join(octets) + ".")
    elif wanted.version == 6:
        rows = rows.filter(registered_network__contains=":")
    else:
        rows = rows.filter(registered_network__contains=".")
    return [pk for pk, recorded in rows.values_list("pk", "registered_network") if inside(recorded, wanted)]
