"""Issue 34, point 3: the snapshot is a file published by a periodic task (temporary name, fsync,
rename, then its index), served with its digest; before the first one a 503 says it is coming."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from benchhub_protocol import envelope
from django.conf import settings
from django.db import connection
from django.test import Client

from benchhub.api import snapshot
from benchhub.api.manifest import site_manifest
from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, publish_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(api: Api, ada: envelope.Signer) -> str:
    response = api.submit(build_payload(), ada)
    assert response.status_code == 201
    return str(response.json()["id"])


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def published_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name != ".lock")


def queued_snapshot_tasks() -> int:
    messages = redis.Redis.from_url(settings.REDIS_URL).lrange(settings.CELERY_TASK_DEFAULT_QUEUE, 0, -1)
    return sum(json.loads(message)["headers"]["task"] == "benchhub.api.tasks.write_snapshot" for message in messages)


def test_before_the_first_snapshot_both_endpoints_say_503_and_queue_its_writing(client: Client) -> None:
    assert settings.REDIS_URL, "with a broker the task is queued, not run in the request"
    before = queued_snapshot_tasks()
    for url in ("/api/v1/snapshot/", "/api/v1/snapshot/index/"):
        response = client.get(url)
        assert response.status_code == 503
        assert response.json()["error"] == "snapshot_pending" and response.json()["detail"]
        assert int(response["Retry-After"]) >= 60 and response.json()["retry_after"] == int(response["Retry-After"])
    assert queued_snapshot_tasks() == before + 2


def test_a_write_queued_by_a_request_writes_nothing_once_one_is_published(submitted: str) -> None:
    """Requests before the first snapshot each queue a write; the queued writes after the first
    must not each write the whole snapshot again (anyone can send those requests)."""
    from benchhub.api import tasks

    directory = Path(settings.BENCHHUB_SNAPSHOT_DIR)
    tasks.write_snapshot(only_if_missing=True)
    first = snapshot.latest(directory)
    assert first is not None and first["submissions"] == 1
    for _ in range(3):
        tasks.write_snapshot(only_if_missing=True)
    assert snapshot.latest(directory) == first
    assert len(published_files(directory)) == 2  # the file and index.json
    tasks.write_snapshot()  # the periodic write still publishes a new one
    assert snapshot.latest(directory) != first


def test_it_serves_the_latest_file_with_its_digest_and_the_index_agrees(
    client: Client, submitted: str, snapshot_dir: Path
) -> None:
    publish_snapshot()
    response = client.get("/api/v1/snapshot/")
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    body = body_of(response)
    digest = hashlib.sha256(body).digest()
    assert response["Repr-Digest"] == f"sha-256=:{base64.b64encode(digest).decode()}:"
    assert response["X-Snapshot-Sha256"] == digest.hex() and response["ETag"] == f'"{digest.hex()}"'
    assert int(response["Content-Length"]) == len(body) and response["Last-Modified"]

    index = client.get("/api/v1/snapshot/index/").json()
    assert index == json.loads((snapshot_dir / "index.json").read_text())
    assert (index["sha256"], index["size_bytes"], index["submissions"]) == (digest.hex(), len(body), 1)
    assert response["X-Snapshot-Generated-At"] == index["generated_at"]
    assert f'filename="{index["file"]}"' in response["Content-Disposition"]
    lines = [json.loads(line) for line in gzip.decompress(body).splitlines()]
    assert lines[0]["generated_at"] == index["generated_at"]
    assert [line["id"] for line in lines if line["kind"] == "submission"] == [submitted]
    # Readable by another user (nginx sends it), as the index is.
    assert {(snapshot_dir / name).stat().st_mode & 0o777 for name in (index["file"], "index.json")} == {0o644}

    again = client.get("/api/v1/snapshot/", HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304 and again["ETag"] == response["ETag"]


def test_behind_nginx_the_view_hands_the_file_over_by_x_accel_redirect(
    client: Client, submitted: str, settings: Any
) -> None:
    settings.BENCHHUB_SNAPSHOT_ACCEL_REDIRECT = "/_snapshot-files/"
    publish_snapshot()
    index = client.get("/api/v1/snapshot/index/").json()
    response = client.get("/api/v1/snapshot/")
    assert response.status_code == 200 and response.content == b""
    assert response["X-Accel-Redirect"] == f"/_snapshot-files/{index['file']}"
    assert response["X-Snapshot-Sha256"] == index["sha256"] and response["Content-Type"] == "application/gzip"


def test_a_write_that_fails_midway_leaves_the_previous_snapshot_served_and_no_partial_file(
    client: Client, api: Api, ada: envelope.Signer, submitted: str, snapshot_dir: Path
) -> None:
    publish_snapshot()
    first = client.get("/api/v1/snapshot/index/").json()
    files = published_files(snapshot_dir)
    # A second submission whose stored withdrawal is not UTF-8: the writer fails on its line, after
    # the header, the campaigns, the keys and the first submission.
    second = api.submit(build_payload(), ada).json()["id"]
    Submission.objects.filter(pk=second).update(withdrawal=b"\xff not utf-8")
    with pytest.raises(UnicodeDecodeError):
        publish_snapshot()
    assert published_files(snapshot_dir) == files
    assert client.get("/api/v1/snapshot/index/").json() == first
    body = body_of(client.get("/api/v1/snapshot/"))
    assert hashlib.sha256(body).hexdigest() == first["sha256"]


@pytest.mark.django_db(transaction=True)  # the writers' threads read what the test committed
def test_two_writers_at_once_leave_one_whole_snapshot_and_the_newest_two_files_are_kept(
    submitted: str, snapshot_dir: Path
) -> None:
    def slow_manifest(campaign: Any) -> dict[str, Any]:
        time.sleep(0.5)  # both writers are inside publish at the same time
        return site_manifest(campaign)

    results: list[snapshot.Index | None] = []

    def writer() -> None:
        try:
            results.append(snapshot.publish(snapshot_dir, slow_manifest))
        finally:
            connection.close()  # each thread's own connection

    writers = [threading.Thread(target=writer) for _ in range(2)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    assert sorted(result is None for result in results) == [False, True], "the second found the lock held"
    [index] = [result for result in results if result is not None]
    assert snapshot.latest(snapshot_dir) == index
    data = (snapshot_dir / index["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == index["sha256"] and len(gzip.decompress(data).splitlines()) > 3

    for _ in range(2):
        publish_snapshot()
    latest = snapshot.latest(snapshot_dir)
    assert latest is not None
    files = [name for name in published_files(snapshot_dir) if name.startswith(snapshot.PREFIX)]
    assert len(files) == snapshot.KEEP and files[-1] == latest["file"] and index["file"] not in files
    assert published_files(snapshot_dir) == [*files, "index.json"]  # no partial file left


def test_the_schema_describes_both_endpoints(client: Client) -> None:
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    download = schema["paths"]["/api/v1/snapshot/"]["get"]["responses"]
    assert "application/gzip" in download["200"]["content"] and "503" in download
    assert {"Repr-Digest", "X-Snapshot-Sha256", "ETag"} <= set(download["200"]["headers"])
    index = schema["paths"]["/api/v1/snapshot/index/"]["get"]["responses"]["200"]["content"]["application/json"]
    fields = schema["components"]["schemas"][index["schema"]["$ref"].rsplit("/", 1)[1]]["properties"]
    assert set(fields) == {"file", "sha256", "size_bytes", "generated_at", "submissions"}
