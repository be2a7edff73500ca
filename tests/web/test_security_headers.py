"""Issue 25: a Content-Security-Policy that allows scripts from this host only, pages that need no
more (no inline script), and the API docs page built from local assets only."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _directives(response: Any) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {name: values for name, *values in (part.split() for part in policy.split(";") if part.strip())}


def test_every_response_carries_a_policy_allowing_scripts_from_this_host_only(campaign: Any) -> None:
    client = Client()
    for url in ("/", "/about/", "/compare/", "/api/v1/campaigns/", reverse("api-docs"), "/no/such/page/"):
        directives = _directives(client.get(url))
        assert directives["script-src"] == ["'self'"], url
        assert directives["default-src"] == ["'self'"] and directives["object-src"] == ["'none'"], url
        assert directives["frame-ancestors"] == ["'none'"] and directives["base-uri"] == ["'none'"], url


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\b(?:src=|type=\"application/json\"))[^>]*>", re.I)


def test_no_page_has_an_inline_script_the_policy_would_block(campaign: Any) -> None:
    client = Client()
    for url in ("/", "/about/", "/compare/", reverse("api-docs")):
        page = client.get(url).content.decode()
        assert "<script" in page or url != reverse("api-docs")
        assert INLINE_SCRIPT.findall(page) == [], url


def test_the_api_docs_page_and_its_script_reference_no_other_host() -> None:
    client = Client()
    page = client.get(reverse("api-docs")).content.decode()
    references = re.findall(r"""(?:src|href)=["']([^"']+)""", page)
    assert references and [ref for ref in references if not ref.startswith("/")] == []
    [script] = [ref for ref in references if "?script" in ref]
    code = client.get(script)
    assert code["Content-Type"].startswith("application/javascript")
    assert not re.findall(r"https?://|//[a-z]", code.content.decode())
