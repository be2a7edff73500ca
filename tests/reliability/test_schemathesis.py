"""Issue 7, item 3: schemathesis over the published OpenAPI schema, in process (Django's WSGI
application on the test database). Half of the request bodies of the two signed endpoints are
replaced by envelopes that a registered key really signed over a generated payload (the valid one
with a generated JSON value at a random field), so generation reaches past the signature check.
No response may be a server error; every refusal is a JSON error naming the problem."""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from benchhub_agent import envelope
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from tests.conftest import Api, build_payload, persona, registration_envelope
from tests.reliability.payload_paths import leaves_and_keys, set_at

SIGNED_ENDPOINTS = {Api.submissions: envelope.SUBMISSION_TYPE, Api.contributors: envelope.REGISTRATION_TYPE}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=8,
)


def _valid_payload(payload_type: str) -> dict[str, Any]:
    if payload_type == envelope.SUBMISSION_TYPE:
        return build_payload(nonce="0" * 32)
    signed = json.loads(registration_envelope(persona("ada"), "ada"))
    return envelope.strict_loads(envelope.b64decode(signed["payload"], "payload"))  # type: ignore[no-any-return]


def signed_mutations(payload_type: str) -> st.SearchStrategy[dict[str, Any]]:
    template = _valid_payload(payload_type)
    paths = [path for path, _ in leaves_and_keys(template)]

    def sign(nonce: str, path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
        payload = copy.deepcopy(template)
        if "nonce" in payload:
            payload["nonce"] = nonce
        set_at(payload, path, value)
        try:
            return envelope.sign(payload, payload_type, [persona("ada")])
        except envelope.EnvelopeError:  # an integer beyond 2^53 cannot be canonicalised: send it raw
            body = json.dumps(payload).encode()
            return {
                "payloadType": payload_type,
                "payload": envelope.b64encode(body),
                "signatures": [persona("ada").signature(payload_type, body)],
            }

    return st.builds(sign, st.uuids().map(lambda u: u.hex), st.sampled_from(paths), JSON_VALUES)


@pytest.fixture
def api_schema() -> Iterator[Any]:
    # As Django's test client does: a request must not close the test's connection (it holds the transaction).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())

    @schema.hook
    def before_generate_body(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        operation = context.operation
        if operation is None or operation.method.upper() != "POST" or operation.path not in SIGNED_ENDPOINTS:
            return strategy
        return st.one_of(strategy, signed_mutations(SIGNED_ENDPOINTS[operation.path]))

    try:
        yield schema
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


EXAMPLES_PER_OPERATION = int(os.environ.get("BENCHHUB_SCHEMATHESIS_EXAMPLES", "60"))


@pytest.mark.django_db(transaction=True)
def test_it_never_answers_a_generated_request_with_a_server_error(
    api_schema: Any, ada: envelope.Signer, roomy_throttles: None
) -> None:
    """Positive and negative generation for every operation; failures are collected, not stopped at."""
    failures: list[tuple[str, str, str]] = []
    calls = 0
    impossible: list[str] = []
    codes: Counter[str] = Counter()

    def check(case: Any) -> None:
        nonlocal calls
        calls += 1
        response = case.call()
        if response.status_code >= 500:
            failures.append((case.method, case.formatted_path, response.text[:200]))
        elif response.status_code >= 400:
            body = response.json()
            codes[str(body.get("error"))] += 1
            if not (body.get("error") and body.get("detail")):
                failures.append((case.method, case.formatted_path, response.text[:200]))

    for result in api_schema.get_all_operations():
        operation = result.ok()
        for mode in schemathesis.GenerationMode:
            run = settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )(given(operation.as_strategy(generation_mode=mode))(check))
            try:
                run()
            except Unsatisfiable:  # nothing to make invalid: an operation without parameters or body
                impossible.append(f"{mode.value} {operation.label}")
    print(f"schemathesis: {calls} generated requests; refusals {dict(codes)}; no negative case for {impossible}")
    assert calls > 500
    assert codes["schema_violation"] > 0, "no signed payload got past the signature check: the hook did nothing"
    assert failures == []
