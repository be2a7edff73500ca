"""docs/protocol.md section 8: the shared envelope code reproduces the test vector byte for byte."""

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import envelope, schema

VECTOR: dict[str, Any] = json.loads((Path(__file__).parent / "protocol-vector.json").read_text())


@pytest.fixture
def signer() -> envelope.Signer:
    return envelope.Signer.from_seed(bytes.fromhex(VECTOR["key_seed_hex"]))


def test_it_derives_public_key_and_keyid(signer: envelope.Signer) -> None:
    assert signer.public_key_b64 == VECTOR["public_key"]
    assert signer.keyid == VECTOR["keyid"]


def test_it_signs_the_registration_envelope_byte_for_byte(signer: envelope.Signer) -> None:
    payload = json.loads(base64.b64decode(VECTOR["registration_envelope"]["payload"]))
    assert envelope.sign(payload, envelope.REGISTRATION_TYPE, [signer]) == VECTOR["registration_envelope"]
    schema.validate_registration(payload)


def test_it_canonicalises_and_signs_the_submission(signer: envelope.Signer) -> None:
    body = VECTOR["submission_payload_utf8"].encode("utf-8")
    payload = envelope.parse_canonical_payload(body)
    assert envelope.canonical_bytes(payload) == body
    assert hashlib.sha256(envelope.pae(envelope.SUBMISSION_TYPE, body)).hexdigest() == VECTOR["submission_pae_sha256"]
    assert envelope.sign(payload, envelope.SUBMISSION_TYPE, [signer]) == VECTOR["submission_envelope"]
    schema.validate_submission(payload)


def test_it_verifies_the_vector_and_refuses_a_flipped_byte(signer: envelope.Signer) -> None:
    opened = envelope.open_envelope(VECTOR["submission_envelope"], envelope.SUBMISSION_TYPE)
    assert envelope.verify_signature(opened, signer.keyid, signer.public_key)
    tampered = bytearray(opened.payload)
    tampered[10] ^= 0x01
    forged = envelope.OpenedEnvelope(opened.payload_type, bytes(tampered), opened.signatures)
    assert not envelope.verify_signature(forged, signer.keyid, signer.public_key)
