"""`GET /api/v1/`: what the API offers, one line per endpoint; and the JSON 404 of every other path
under /api/v1/, DEBUG or not (Django's debug 404 page is HTML, and a malformed id never reaches a
view: the URL converter refuses it)."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, JsonResponse
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchhub.api.errors import error_body
from benchhub.api.throttling import ReadThrottle

SAMPLE_ID = "00000000-0000-7000-8000-000000000000"
SAMPLE_SLUG = "mv-ext-iquants"

# (URL name, methods, what it is). tests/server/test_api_root.py checks that every route is here.
ENDPOINTS: tuple[tuple[str, str, str], ...] = (
    ("campaigns", "GET", "Campaigns, each as the manifest an agent follows"),
    ("campaign-detail", "GET", "One campaign's manifest: its open version, signed"),
    ("campaign-versions", "GET", "Every version of a campaign, with what each changed"),
    ("campaign-patch", "GET", "A patch file of a campaign"),
    ("leaderboard", "GET", "Leaderboard cells of a campaign (?campaign=<slug>, filters)"),
    ("reference-rows", "GET", "The patch authors' published rows (not signed, never in a cell)"),
    ("submissions", "GET, POST", "Submissions, newest first; POST a signed result"),
    ("submission-detail", "GET", "One submission with its variants and measurements"),
    ("api-submission-envelope", "GET", "A submission's stored envelope, byte for byte"),
    ("submission-withdraw", "POST", "Withdraw one of your own submissions (signed)"),
    ("contributors", "POST", "Register a key (signed)"),
    ("measurements", "GET", "Per-submission measurements"),
    ("measurements-csv", "GET", "The same measurements as CSV"),
    ("snapshot", "GET", "Every envelope, key and decision, gzipped: what scripts/recompute_cells.py checks"),
    ("snapshot-index", "GET", "The latest snapshot's file name, sha256, size, time and submission count"),
    ("api-schema", "GET", "The OpenAPI schema"),
    ("api-docs", "GET", "The API documentation (Swagger UI)"),
)
SAMPLE_ARGS = {
    "campaign-detail": [SAMPLE_SLUG],
    "campaign-versions": [SAMPLE_SLUG],
    "campaign-patch": [SAMPLE_SLUG, "01-mv-ext-iquants.patch"],
    "submission-detail": [SAMPLE_ID],
    "api-submission-envelope": [SAMPLE_ID],
    "submission-withdraw": [SAMPLE_ID],
}


def _path(name: str) -> str:
    """The route with its parameters written as {slug}, {id}, {name}."""
    path = reverse(name, args=SAMPLE_ARGS.get(name, []))
    return path.replace(SAMPLE_ID, "{id}").replace("01-mv-ext-iquants.patch", "{name}").replace(SAMPLE_SLUG, "{slug}")


class ApiRootView(APIView):
    throttle_classes = (ReadThrottle,)

    @extend_schema(
        summary="The endpoints of this API",
        responses=inline_serializer(
            "ApiRoot",
            {
                "version": serializers.CharField(),
                "endpoints": inline_serializer(
                    "ApiEndpoint",
                    {
                        "path": serializers.CharField(),
                        "methods": serializers.CharField(),
                        "about": serializers.CharField(),
                    },
                    many=True,
                ),
                "docs": serializers.URLField(),
                "schema": serializers.URLField(),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        absolute = request.build_absolute_uri
        return Response(
            {
                "version": "1",
                "endpoints": [
                    {"path": _path(name), "methods": methods, "about": about} for name, methods, about in ENDPOINTS
                ],
                "docs": absolute(reverse("api-docs")),
                "schema": absolute(reverse("api-schema")),
            }
        )


@csrf_exempt  # a POST to a malformed path is a JSON 404 too, not the CSRF failure page
def malformed_id(request: HttpRequest, pk: str) -> JsonResponse:
    try:
        uuid.UUID(pk)
    except ValueError:
        pass
    else:  # a well-formed id under a path that does not exist
        return no_such_endpoint(request, pk)
    return JsonResponse(
        error_body("not_found", f"{pk!r} is not a submission id: ids are UUIDs.", field="id"), status=404
    )


@csrf_exempt
def no_such_endpoint(request: HttpRequest, rest: str) -> JsonResponse:
    body = error_body("not_found", f"No endpoint at {request.path}; GET /api/v1/ lists them.")
    try:
        resolved = resolve(request.path + "/")
    except Resolver404:
        resolved = None
    if resolved is not None and resolved.url_name and not request.path.endswith("/"):
        body["did_you_mean"] = request.path + "/"
    return JsonResponse(body, status=404)
