"""Issue 7, item 3: schemathesis over the published OpenAPI schema, in process (Django's WSGI
application on the test database). Half of the request bodies of the two signed endpoints are
replaced by envelopes that a registered key really signed over a generated payload (the valid one
with a generated JSON value at a random field), so generation reaches past the signature check.
No response may be a server error; every refusal is a JSON error naming the problem.

Issue 25 extends it to every query parameter and to the web routes: a cursor (`cursor` of the API,
`before` of the site's lists) is, half the time, one crafted to reach past its decoding (base64 of
a position that is junk, an integer past bigint, or an instant with any legal offset), and the
site's routes, which have no OpenAPI document of their own, are described by web_routes() below (a
test checks it lists every one) and fuzzed the same way; a site refusal is an HTML page."""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta, timezone
from typing import Any
from urllib.parse import urlencode

import pytest
import schemathesis
from benchhub_protocol import envelope
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.urls import URLPattern, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from benchhub.web.views import chips_by_slug
from tests.conftest import Api, build_payload, persona, publish_snapshot, signed_registration
from tests.reliability.payload_paths import leaves_and_keys, set_at

SIGNED_ENDPOINTS = {Api.submissions: envelope.SUBMISSION_TYPE, Api.contributors: envelope.REGISTRATION_TYPE}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=8,
)


# Instants with every offset ISO 8601 allows, often those PostgreSQL refuses (past ±15:59).
LONGEST_OFFSET = 24 * 60 - 1
OFFSETS = st.sampled_from([-LONGEST_OFFSET, -16 * 60, 16 * 60, LONGEST_OFFSET]) | st.integers(
    min_value=-LONGEST_OFFSET, max_value=LONGEST_OFFSET
)
INSTANTS = st.datetimes(timezones=OFFSETS.map(lambda minutes: timezone(timedelta(minutes=minutes))))
POSITIONS = st.one_of(
    INSTANTS.map(str), INSTANTS.map(lambda moment: moment.isoformat()), st.integers().map(str), st.text(max_size=40)
)
API_CURSORS = st.builds(
    lambda position, offset, reverse: base64.b64encode(
        urlencode({"p": position, "o": offset, "r": reverse}).encode()
    ).decode(),
    POSITIONS,
    st.integers(min_value=-5, max_value=10**6) | st.text(max_size=5),
    st.sampled_from(["0", "1", "2", "x"]),
)
SITE_CURSORS = st.one_of(
    st.builds(lambda moment, key: f"{moment.isoformat()}~{key}", INSTANTS, st.uuids()),
    st.builds(lambda position, key: f"{position}~{key}", POSITIONS, st.text(max_size=40)),
)
CRAFTED_QUERY = {"cursor": API_CURSORS, "before": SITE_CURSORS}


def craft_cursors(query: Any) -> st.SearchStrategy[Any]:
    """Half the time, a query's cursor is replaced by one that decodes (a generated one rarely does),
    beside the query's other parameters or alone: a generated filter value is mostly refused before
    the cursor is read, so without the lone cursor the decoding path could go unvisited."""
    if not isinstance(query, dict) or not CRAFTED_QUERY.keys() & query.keys():
        return st.just(query)
    beside = st.fixed_dictionaries(
        {
            name: st.just(value) | CRAFTED_QUERY[name] if name in CRAFTED_QUERY else st.just(value)
            for name, value in query.items()
        }
    )
    alone = st.fixed_dictionaries({name: CRAFTED_QUERY[name] for name in CRAFTED_QUERY.keys() & query.keys()})
    return beside | alone


def _valid_payload(payload_type: str) -> dict[str, Any]:
    if payload_type == envelope.SUBMISSION_TYPE:
        return build_payload(nonce="0" * 32)
    signed = json.loads(signed_registration(persona("ada"), "ada"))
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
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())

    @schema.hook
    def before_generate_body(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        operation = context.operation
        if operation is None or operation.method.upper() != "POST" or operation.path not in SIGNED_ENDPOINTS:
            return strategy
        return st.one_of(strategy, signed_mutations(SIGNED_ENDPOINTS[operation.path]))

    schema.hook("flatmap_query")(lambda context, query: craft_cursors(query))
    with connections_kept_open():
        yield schema


@contextlib.contextmanager
def connections_kept_open() -> Iterator[None]:
    # As Django's test client does: a request must not close the test's connection (it holds the transaction).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


EXAMPLES_PER_OPERATION = int(os.environ.get("BENCHHUB_SCHEMATHESIS_EXAMPLES", "60"))


def fuzz(schema: Any, check: Callable[[Any], None]) -> list[str]:
    """Positive and negative generation for every operation; answers the operations and modes that
    had nothing to make invalid (an operation without parameters or body)."""
    impossible = []
    for result in schema.get_all_operations():
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
            except Unsatisfiable:
                impossible.append(f"{mode.value} {operation.label}")
    return impossible


@pytest.mark.django_db(transaction=True)
def test_it_never_answers_a_generated_request_with_a_server_error(
    api_schema: Any, ada: envelope.Signer, roomy_throttles: None
) -> None:
    """Failures are collected, not stopped at. A snapshot is published first, as on a running site
    (before the first one, both snapshot endpoints answer the 503 tests/server/test_snapshot.py checks)."""
    publish_snapshot()
    failures: list[tuple[str, str, str]] = []
    calls = 0
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

    impossible = fuzz(api_schema, check)
    print(f"schemathesis: {calls} generated requests; refusals {dict(codes)}; no negative case for {impossible}")
    assert calls > 500
    assert codes["schema_violation"] > 0, "no signed payload got past the signature check: the hook did nothing"
    assert codes["invalid_cursor"] > 0, "no crafted cursor got past its base64: the query hook did nothing"
    assert failures == [], failures[:5]


def _page(*parameters: dict[str, Any]) -> dict[str, Any]:
    return {"get": {"parameters": list(parameters), "responses": {"200": {"description": "a page"}}}}


def _in_path(name: str, known: str) -> dict[str, Any]:
    """Positive generation asks for the page that exists, so its query parameters reach the
    database; negative generation for anything else."""
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "enum": [known]}}


def _in_query(name: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": {"type": "string"}}


def web_routes(handle: str = "ada", chip: str = "chip", submission: str = "id") -> dict[str, dict[str, Any]]:
    """The site's routes, and the query parameters each view reads (request.GET in benchhub/web/)."""
    return {
        "/": _page(_in_query("campaign"), _in_query("variant")),
        "/campaigns/{slug}/": _page(_in_path("slug", "mv-ext-iquants")),
        "/chips/{slug}/": _page(_in_path("slug", chip), _in_query("before", required=True)),
        "/submissions/{pk}/": _page(_in_path("pk", submission)),
        "/submissions/{pk}/envelope.json": _page(_in_path("pk", submission)),
        "/contributors/{handle}/": _page(_in_path("handle", handle), _in_query("before", required=True)),
        "/compare/": _page(_in_query("a"), _in_query("b"), _in_query("campaign"), _in_query("variant")),
        "/about/": _page(),
        "/agent/{filename}": _page(_in_path("filename", "benchhub_agent-0.1.0-py3-none-any.whl")),
    }


def test_the_web_routes_fuzzed_are_every_route_of_the_site() -> None:
    routes = {
        "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))
        for pattern in get_resolver("benchhub.web.urls").url_patterns
        if isinstance(pattern, URLPattern)
    }
    assert routes == set(web_routes())


@pytest.mark.django_db(transaction=True)
def test_it_never_answers_a_generated_site_request_with_a_server_error(ada: envelope.Signer, api: Any) -> None:
    """Every refusal of the site is an HTML page (its 404 page, or the compare form's 400 that says
    what to pick), never a 500 and never a JSON body."""
    submission = api.submit(build_payload(), ada).json()["id"]
    call_command("load_reference_rows", stdout=io.StringIO())  # published rows: chips with a page
    chip = next(iter(chips_by_slug()))
    paths = web_routes(handle="ada", chip=chip, submission=submission)
    schema = schemathesis.openapi.from_dict(
        {"openapi": "3.0.3", "info": {"title": "site", "version": "1"}, "paths": paths}
    )
    schema.app = get_wsgi_application()
    schema.hook("flatmap_query")(lambda context, query: craft_cursors(query))
    failures: list[tuple[str, int, str]] = []
    statuses: Counter[int] = Counter()

    def check(case: Any) -> None:
        response = case.call()
        statuses[response.status_code] += 1
        html = response.headers.get("content-type", [""])[0].startswith("text/html")  # lowercase names, lists
        if response.status_code >= 500 or (
            response.status_code >= 400 and not (response.status_code in (400, 404) and html)
        ):
            failures.append((case.formatted_path, response.status_code, response.text[:200]))

    with connections_kept_open():
        impossible = fuzz(schema, check)
    print(
        f"schemathesis, site: {sum(statuses.values())} requests; statuses {dict(statuses)}; none negative {impossible}"
    )
    assert statuses[200] and statuses[404]
    assert failures == [], failures[:5]
