"""Every API error is `{"error": <code>, "detail": <sentence>, ...}` (docs/protocol.md), never HTML."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ApiError(exceptions.APIException):
    """A refusal with a machine code and, where one part of the input is at fault, its field."""

    def __init__(self, http_status: int, code: str, detail: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status_code = http_status
        self.code = code
        self.field = field
        self.extra = extra  # more for a client to act on: the refused value, the known ones

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "detail": str(self.detail), **self.extra}
        if self.field:
            body["field"] = self.field
        return body | self.extra


def error_body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail, **extra}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApiError):
        return Response(exc.body(), status=exc.status_code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.Throttled):
        response.data = error_body("throttled", str(exc.detail), retry_after=getattr(exc, "wait", None))
    elif isinstance(exc, exceptions.ValidationError):
        field, message = _first_error(exc.detail)
        response.data = error_body("invalid", message, field=field)
    elif isinstance(exc, exceptions.APIException):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        response.data = error_body(str(exc.default_code), detail)
    return response


def _first_error(detail: Any, prefix: str = "") -> tuple[str, str]:
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        return _first_error(value, f"{prefix}.{key}" if prefix else str(key))
    if isinstance(detail, list) and detail:
        return _first_error(detail[0], prefix)
    return prefix, str(detail)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """JSON under /api/, the site's own page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "No such resource."), status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refuses before any view (a Host not allowed, a malformed header)."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            error_body("bad_request", "The request was malformed or its Host is not served."), status=400
        )
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("forbidden", "This request is not allowed."), status=403)
    return defaults.permission_denied(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("server_error", "The server failed; the error has been logged."), status=500)
    return defaults.server_error(request)
