"""Issue 30, point 7: the smaller holes, each attack over HTTP against a live server."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import requests
from benchhub_protocol.payloads import signed_withdrawal
from django.contrib.auth.models import User
from markdown_it import MarkdownIt

from benchhub.accounts.models import Contributor, ModerationEvent, PublicKey
from benchhub.results import moderation
from benchhub.results.models import Submission
from tests.attacks.conftest import Attacker
from tests.conftest import build_payload, persona, read_csv

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery staple"


class Browser:
    """A moderator's (or an attacker's) browser on the admin: CSRF token from the form, as Django asks."""

    def __init__(self, url: str, address: str) -> None:
        self.url, self.address = url.rstrip("/"), address
        self.session = requests.Session()
        self.session.headers.update({"X-Forwarded-For": address, "Referer": self.url + "/admin/"})

    def _token(self, path: str) -> str:
        page = self.session.get(self.url + path, timeout=30).text
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        return found.group(1) if found else self.session.cookies.get("csrftoken", "")

    def post(self, path: str, data: dict[str, Any], token_from: str | None = None) -> requests.Response:
        data = {"csrfmiddlewaretoken": self._token(token_from or path), **data}
        response = self.session.post(self.url + path, data=data, timeout=30, allow_redirects=False)
        assert response.status_code < 500, response.text[:300]
        return response

    def login(self, password: str) -> int:
        return self.post("/admin/login/", {"username": "admin", "password": password}).status_code


@pytest.fixture
def admin_user() -> User:
    return User.objects.create_superuser("admin", "admin@example.org", PASSWORD)


def test_wrong_admin_passwords_lock_the_attackers_address_not_the_admin(
    attacker: Attacker, live_server: Any, admin_user: User
) -> None:
    thief = Browser(live_server.url, "203.0.113.66")
    assert [thief.login(f"guess-{n}") for n in range(8)][-3:] == [429, 429, 429]
    assert thief.login(PASSWORD) == 429
    assert Browser(live_server.url, "192.0.2.10").login(PASSWORD) == 302  # the admin, elsewhere, logs in


@pytest.fixture
def ada_submission(attacker: Attacker) -> str:
    assert attacker.register(persona("ada"), "ada").status_code == 201
    answer = attacker.submit(build_payload(), persona("ada"))
    assert answer.status_code == 201
    return str(answer.json()["id"])


def test_formula_values_in_the_csv_export_are_escaped(attacker: Attacker) -> None:
    assert attacker.register(persona("eve"), "eve").status_code == 201
    formulas = {"chip": "=HYPERLINK(1)", "label": "+SUM(1)", "other": "@cmd", "minus": "-2+3"}
    for chip, label in (
        (formulas["chip"], formulas["label"]),
        ("Apple M1", formulas["other"]),
        ("Apple M2", formulas["minus"]),
    ):
        answer = attacker.submit(build_payload(machine={"chip": chip}, model={"label": label}), persona("eve"))
        assert answer.status_code == 201, answer.text
    rows = read_csv(attacker.get("/api/v1/measurements.csv").text)
    values = {row["chip"] for row in rows} | {row["model"] for row in rows}
    assert {"'=HYPERLINK(1)", "'+SUM(1)", "'@cmd", "'-2+3"} <= values
    assert not any(value[:1] in "=+-@" for row in rows for value in row.values() if value)


def test_contributor_links_and_images_in_the_markdown_export_stay_text(attacker: Attacker) -> None:
    assert attacker.register(persona("eve"), "eve").status_code == 201
    label = "![x](https://evil.example/p.png) [click](https://evil.example) <img src=x> https://evil.example"
    answer = attacker.submit(build_payload(model={"label": label}), persona("eve"))
    assert answer.status_code == 201
    page = attacker.get(f"/submissions/{answer.json()['id']}/").text
    found = re.search(r'<textarea id="markdown-[^"]*"[^>]*>(.*?)</textarea>', page, re.S)
    assert found is not None
    text = html.unescape(found.group(1))
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    children = [child for token in tokens for child in (token.children or [])]
    assert not {child.type for child in children} & {"image", "html_inline"}
    links = [str(child.attrs.get("href")) for child in children if child.type == "link_open"]
    assert links == [attacker.url + f"/submissions/{answer.json()['id']}/"]  # only the permalink
    assert "https://" not in text  # no bare URL for GitHub to make a link of
    rendered = "".join(child.content for token in tokens for child in (token.children or []) if child.type == "text")
    assert "![x](https://evil.example/p.png)" in rendered  # shown as written, as text


def test_a_withdrawal_keeps_the_moderators_hide_reason_beside_its_own(attacker: Attacker, ada_submission: str) -> None:
    moderation.set_hidden(Submission.objects.filter(pk=ada_submission), True, None, "fabricated rows")  # type: ignore[arg-type]
    response = attacker.post(
        f"/api/v1/submissions/{ada_submission}/withdraw", signed_withdrawal(ada_submission, persona("ada"))
    )
    assert response.status_code == 200
    reason = attacker.get(f"/api/v1/submissions/{ada_submission}/").json()["state_reason"]
    assert "withdrawn" in reason and "fabricated rows" in reason


def test_a_banned_key_cannot_withdraw(attacker: Attacker, ada_submission: str) -> None:
    moderation.set_banned(PublicKey.objects.all(), True, None, "banned")  # type: ignore[arg-type]
    response = attacker.post(
        f"/api/v1/submissions/{ada_submission}/withdraw", signed_withdrawal(ada_submission, persona("ada"))
    )
    assert (response.status_code, response.json()["error"]) == (403, "key_banned")
    assert Submission.objects.get(pk=ada_submission).withdrawn_at is None


def test_an_admin_cannot_mark_a_contributor_demo_or_delete_one_without_an_audit_row(
    attacker: Attacker, live_server: Any, admin_user: User, ada_submission: str
) -> None:
    moderator = Browser(live_server.url, "192.0.2.20")
    assert moderator.login(PASSWORD) == 302
    ada = Contributor.objects.get(handle="ada")
    change = f"/admin/accounts/contributor/{ada.pk}/change/"
    edited = moderator.post(change, {"handle": "ada", "is_demo": "on"}, token_from="/admin/")
    assert edited.status_code == 403 and not Contributor.objects.get(pk=ada.pk).is_demo  # read-only form
    deleted = moderator.post(f"/admin/accounts/contributor/{ada.pk}/delete/", {"post": "yes"}, token_from="/admin/")
    assert deleted.status_code == 403 and Contributor.objects.filter(pk=ada.pk).exists()

    listing = "/admin/accounts/contributor/"
    moderator.post(listing, {"action": "mark_demo", "_selected_action": [ada.pk]})
    assert Contributor.objects.get(pk=ada.pk).is_demo
    lonely = Contributor.objects.create(handle="lonely")
    moderator.post(listing, {"action": "delete", "_selected_action": [lonely.pk]})
    assert not Contributor.objects.filter(pk=lonely.pk).exists()
    audited = set(ModerationEvent.objects.values_list("action", "target", "actor_name"))
    assert {("mark_demo", "ada", "admin"), ("delete_contributor", "lonely", "admin")} <= audited
