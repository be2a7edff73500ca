"""The typed refusal of the ingest paths; the API turns it into `{"error", "detail", "field"}`."""

from __future__ import annotations

from benchhub_protocol.envelope import EnvelopeError
from benchhub_protocol.schema import SchemaViolation


class IngestError(Exception):
    def __init__(self, http_status: int, code: str, detail: str, field: str | None = None, **extra: str) -> None:
        super().__init__(detail)
        self.http_status = http_status
        self.code = code
        self.detail = detail
        self.field = field
        self.extra = extra  # more fields of the error body, e.g. the stored submission a duplicate repeats

    @classmethod
    def from_envelope(cls, error: EnvelopeError) -> IngestError:
        return cls(400, error.code, error.detail, error.field)

    @classmethod
    def from_schema(cls, error: SchemaViolation) -> IngestError:
        return cls(
            400, "schema_violation", f"{error.field}: {error.detail}" if error.field else error.detail, error.field
        )
