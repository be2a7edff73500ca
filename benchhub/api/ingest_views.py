"""The two signed write endpoints. Both read the raw body themselves (bounded), so the bytes
that are verified are exactly the bytes that are stored."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchhub.api import examples, serializers
from benchhub.api.errors import ApiError
from benchhub.api.throttling import (
    REGISTRATION_THROTTLES,
    AddressThrottle,
    KeyThrottle,
    check_in_order,
    client_address,
    network_of,
)
from benchhub.results import ingest

ERRORS = {
    400: OpenApiResponse(serializers.ErrorSerializer, "malformed, not canonical, schema violation (see `field`)"),
    401: OpenApiResponse(serializers.ErrorSerializer, "unknown keyid or a signature that does not verify"),
    409: OpenApiResponse(
        serializers.ErrorSerializer, "conflict (handle taken, nonce reused, payload replayed under another key)"
    ),
    413: OpenApiResponse(serializers.ErrorSerializer, "body over the size limit"),
    429: OpenApiResponse(
        serializers.ErrorSerializer, "throttled per client address, per key, or (registration) per network or overall"
    ),
}


def read_body(request: Request) -> bytes:
    limit: int = settings.BENCHHUB_MAX_BODY_BYTES
    too_big = ApiError(413, "too_large", f"The body exceeds the limit of {limit} bytes.")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number.") from None
    if declared > limit:
        raise too_big
    body = request._request.read(limit + 1)
    if len(body) > limit:
        raise too_big
    return bytes(body)


def _refusal(error: ingest.IngestError) -> ApiError:
    return ApiError(error.http_status, error.code, error.detail, error.field, **error.extra)


class ContributorsView(APIView):
    throttle_classes = REGISTRATION_THROTTLES

    def check_throttles(self, request: Request) -> None:
        check_in_order(request, self, [throttle() for throttle in REGISTRATION_THROTTLES])

    @extend_schema(
        operation_id="register_key",
        summary="Register a key (or link a second key to a handle)",
        description=(
            "Body: a DSSE envelope of type application/vnd.benchhub.registration.v1+json, signed by the key "
            "being registered; to add a key to an existing handle, also signed by a key already on it."
        ),
        request=serializers.EnvelopeSerializer,
        examples=[examples.REGISTRATION],
        responses={
            201: serializers.RegistrationResponseSerializer,
            200: serializers.RegistrationResponseSerializer,
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        try:
            network = network_of(client_address(request._request))
            registration = ingest.register(read_body(request), network=network)
        except ingest.IngestError as error:
            raise _refusal(error) from None
        return Response(registration.body(), status=registration.http_status)


class SubmissionIngestMixin:
    def create_submission(self, request: Request) -> Response:
        def throttle_per_key(verified: ingest.VerifiedEnvelope) -> None:
            request.benchhub_keyid = verified.key.keyid  # type: ignore[attr-defined]
            throttle = KeyThrottle()
            if not throttle.allow_request(request, self):  # type: ignore[arg-type]
                raise Throttled(wait=throttle.wait())

        try:
            result = ingest.ingest_submission(read_body(request), before_parse=throttle_per_key)
        except ingest.IngestError as error:
            raise _refusal(error) from None
        body = {
            "id": result.id,
            "url": request.build_absolute_uri(reverse("submission", args=[result.id])),  # the web page
            "status": result.status,
            # When its key leaves probation and the result enters the cells; null: it counts now.
            "counts_from": result.counts_from.isoformat().replace("+00:00", "Z") if result.counts_from else None,
        }
        return Response(body, status=result.http_status)


class WithdrawView(APIView):
    throttle_classes = (AddressThrottle,)

    @extend_schema(
        operation_id="withdraw_submission",
        summary="Withdraw one of your own submissions",
        description=(
            "Body: a DSSE envelope of type application/vnd.benchhub.withdrawal.v1+json whose payload is "
            '{"schema_version": 1, "submission": "<this id>", "created_at": "<RFC 3339 UTC>"}, signed by the key that '
            "signed the submission. It leaves every cell; its page and the snapshot show it as withdrawn; the raw "
            "envelope is kept. Repeating it answers 200 again with the first withdrawal's time."
        ),
        request=serializers.EnvelopeSerializer,
        responses={200: serializers.WithdrawnSerializer, **ERRORS},
    )
    def post(self, request: Request, pk: str) -> Response:
        try:
            submission = ingest.withdraw_submission(str(pk), read_body(request))
        except ingest.IngestError as error:
            raise _refusal(error) from None
        withdrawn_at = submission.withdrawn_at.isoformat() if submission.withdrawn_at else None
        return Response({"id": str(submission.id), "status": "withdrawn", "withdrawn_at": withdrawn_at})
