"""`benchhub-agent run` ends with its table as GitHub Markdown, the form the site's "Copy as
Markdown" gives, ready for a pull request."""

from __future__ import annotations

from benchhub_agent import cli
from markdown_it import MarkdownIt

from tests.conftest import build_payload


def test_the_run_prints_its_table_as_markdown_that_renders_as_a_table() -> None:
    text = cli._markdown(build_payload(), "https://benchhub.example/submissions/x/")
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<table>" in html and ">BS4</th>" in html
    assert "148.0→210.0 (+42%)" in html and "1 machine" in html
    assert "https://benchhub.example/submissions/x/" in text
