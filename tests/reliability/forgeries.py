"""Generators of tampered and forged envelopes (issue 7, item 1). Each yields (kind, url, body);
none of them may ever be accepted. Deterministic: the same seed gives the same attack."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from benchhub_protocol import envelope

from tests.conftest import build_payload

CONTRIBUTORS = "/api/v1/contributors/"
SUBMISSIONS = "/api/v1/submissions/"
# The order of the Ed25519 base point: S and S + L are the same scalar to a lax verifier.
ED25519_L = 2**252 + 27742317777372353535851937790883648493
# libsodium's blocklist: the small-order points, canonical and not (sign bit set, y >= p).
SMALL_ORDER_KEYS = tuple(
    bytes.fromhex(text)
    for text in (
        "0100000000000000000000000000000000000000000000000000000000000000",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000080",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
        "0100000000000000000000000000000000000000000000000000000000000080",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    )
)

Forgery = tuple[str, str, bytes]


@dataclass
class Cast:
    """Registered contributors, an outsider, and payloads Ada has already published."""

    ada: envelope.Signer
    others: Sequence[envelope.Signer]  # registered, each with their own handle
    mallory: envelope.Signer  # never registered
    published: Sequence[bytes]  # payload bytes of Ada's stored submissions


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _envelope(payload_type: str, body: bytes, signatures: list[dict[str, str]]) -> bytes:
    return json.dumps({"payloadType": payload_type, "payload": _b64(body), "signatures": signatures}).encode()


def _fresh_body() -> bytes:
    return envelope.canonical_bytes(build_payload())


def _sig(keyid: str, raw: bytes) -> dict[str, str]:
    return {"keyid": keyid, "sig": _b64(raw)}


def bit_flips_in_the_envelope(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    """One bit flipped anywhere in the bytes of a valid, never-sent envelope of Ada's."""
    for index in range(count):
        if index % 100 == 0:
            original = envelope.envelope_bytes(envelope.sign(build_payload(), envelope.SUBMISSION_TYPE, [cast.ada]))
        tampered = bytearray(original)
        tampered[rng.randrange(len(tampered))] ^= 1 << rng.randrange(8)
        yield "bit flip in the envelope", SUBMISSIONS, bytes(tampered)


def bit_flips_in_the_payload(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    """One bit flipped in the decoded payload bytes, re-encoded, Ada's signature kept."""
    for index in range(count):
        if index % 100 == 0:
            body = _fresh_body()
            signature = cast.ada.signature(envelope.SUBMISSION_TYPE, body)
        tampered = bytearray(body)
        tampered[rng.randrange(len(tampered))] ^= 1 << rng.randrange(8)
        yield "bit flip in the payload", SUBMISSIONS, _envelope(envelope.SUBMISSION_TYPE, bytes(tampered), [signature])


def wrong_keys(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    for index in range(count):
        body = _fresh_body()
        forged = cast.mallory.signature(envelope.SUBMISSION_TYPE, body)
        if index % 3 == 0:
            yield (
                "outsider's signature under Ada's keyid",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, body, [{"keyid": cast.ada.keyid, "sig": forged["sig"]}]),
            )
        elif index % 3 == 1:
            yield "outsider's own unregistered key", SUBMISSIONS, _envelope(envelope.SUBMISSION_TYPE, body, [forged])
        else:
            transplanted = cast.ada.signature(envelope.SUBMISSION_TYPE, _fresh_body())
            yield (
                "Ada's signature moved onto another payload",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, body, [transplanted]),
            )


def small_order_keys(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    """Keys a lax verifier accepts for any message with R = identity (or R = A), S = 0."""
    for index in range(count):
        weak = SMALL_ORDER_KEYS[index % len(SMALL_ORDER_KEYS)]
        keyid = envelope.keyid_of(weak)
        forged_sig = (weak if index % 2 else SMALL_ORDER_KEYS[0]) + bytes(32)
        if index % 2 == 0:
            payload = {
                "schema_version": 1,
                "handle": f"weak-{index}",
                "public_key": _b64(weak),
                "created_at": "2026-11-29T10:00:00Z",
            }
            body = envelope.canonical_bytes(payload)
            yield (
                "small-order key registration",
                CONTRIBUTORS,
                _envelope(envelope.REGISTRATION_TYPE, body, [_sig(keyid, forged_sig)]),
            )
        else:
            yield (
                "submission under a small-order key",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, _fresh_body(), [_sig(keyid, forged_sig)]),
            )


def _malleate(sig: bytes, how: int) -> bytes:
    r, s = sig[:32], int.from_bytes(sig[32:], "little")
    options: list[Callable[[], bytes]] = [
        lambda: r + (s + ED25519_L).to_bytes(32, "little"),
        lambda: r + (s + 2 * ED25519_L).to_bytes(32, "little"),
        lambda: r[:31] + bytes([r[31] ^ 0x80]) + sig[32:],  # R's sign bit
        lambda: r + ((ED25519_L - s) % ED25519_L).to_bytes(32, "little"),  # -S
        lambda: sig[32:] + r,  # R and S swapped
        lambda: r + bytes(32),
        lambda: bytes(64),
    ]
    return options[how % len(options)]()


def malleated_signatures(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    for index in range(count):
        body = _fresh_body()
        genuine = base64.b64decode(cast.ada.signature(envelope.SUBMISSION_TYPE, body)["sig"])
        yield (
            "malleated signature",
            SUBMISSIONS,
            _envelope(envelope.SUBMISSION_TYPE, body, [_sig(cast.ada.keyid, _malleate(genuine, index))]),
        )


def swapped_payload_types(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    registration = envelope.canonical_bytes(
        {
            "schema_version": 1,
            "handle": "ada",
            "public_key": cast.ada.public_key_b64,
            "created_at": "2026-11-29T10:00:00Z",
        }
    )
    lookalikes = (
        "application/vnd.benchhub.submission.v2+json",
        "application/vnd.benchhub.submission.v1+json ",
        "Application/vnd.benchhub.submission.v1+json",
        "application/json",
        "",
    )
    for index in range(count):
        body = _fresh_body()
        kind = index % 5
        if kind == 0:  # a genuinely signed registration-typed envelope around a submission payload
            yield (
                "registration type at the submission endpoint",
                SUBMISSIONS,
                _envelope(envelope.REGISTRATION_TYPE, body, [cast.ada.signature(envelope.REGISTRATION_TYPE, body)]),
            )
        elif kind == 1:  # the type field says submission, the signature was made for registration
            yield (
                "type swapped after signing",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, body, [cast.ada.signature(envelope.REGISTRATION_TYPE, body)]),
            )
        elif kind == 2:
            yield (
                "submission type at the registration endpoint",
                CONTRIBUTORS,
                _envelope(envelope.SUBMISSION_TYPE, body, [cast.ada.signature(envelope.SUBMISSION_TYPE, body)]),
            )
        elif kind == 3:
            yield (
                "registration payload under the submission type",
                SUBMISSIONS,
                _envelope(
                    envelope.SUBMISSION_TYPE, registration, [cast.ada.signature(envelope.SUBMISSION_TYPE, registration)]
                ),
            )
        else:
            fake = lookalikes[rng.randrange(len(lookalikes))]
            yield "look-alike payload type", SUBMISSIONS, _envelope(fake, body, [cast.ada.signature(fake, body)])


def replays_under_own_key(cast: Cast, rng: random.Random, count: int) -> Iterator[Forgery]:
    """Another contributor takes Ada's published payload bytes and signs them as their own."""
    for index in range(count):
        body = cast.published[index % len(cast.published)]
        thief = cast.others[(index // len(cast.published)) % len(cast.others)]
        ada_sig = cast.ada.signature(envelope.SUBMISSION_TYPE, body)
        kind = index % 4
        if kind in (0, 1):
            yield (
                "Ada's payload re-signed by another key",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, body, [thief.signature(envelope.SUBMISSION_TYPE, body)]),
            )
        elif kind == 2:
            yield (
                "Ada's signature relabelled with another keyid",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, body, [{"keyid": thief.keyid, "sig": ada_sig["sig"]}]),
            )
        else:
            yield (
                "Ada's envelope countersigned by another key",
                SUBMISSIONS,
                _envelope(envelope.SUBMISSION_TYPE, body, [ada_sig, thief.signature(envelope.SUBMISSION_TYPE, body)]),
            )


# Shares of the whole attack, by generator.
MIX: tuple[tuple[Callable[[Cast, random.Random, int], Iterator[Forgery]], float], ...] = (
    (bit_flips_in_the_envelope, 0.30),
    (bit_flips_in_the_payload, 0.20),
    (wrong_keys, 0.10),
    (small_order_keys, 0.10),
    (malleated_signatures, 0.10),
    (swapped_payload_types, 0.10),
    (replays_under_own_key, 0.10),
)


def attack(cast: Cast, total: int, seed: int = 7) -> Iterator[Forgery]:
    rng = random.Random(seed)
    for generator, share in MIX:
        yield from generator(cast, rng, round(total * share))
