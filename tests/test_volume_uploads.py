"""Resumable uploads into a volume, over HTTP on both backends: parts straight to the store (S3) or
through the hub (local), resume after a killed client, quota reservations that hold under a race,
and bad input that leaves nothing behind.

Run as a script, this module is the small upload client the resume test kills and restarts:
    python tests/test_volume_uploads.py URL TOKEN PATH FILE SHA256 STATE_FILE
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import requests


def upload_client(url: str, token: str, path: str, file: str, sha256: str, state_file: str) -> None:
    """Uploads `file` to `path` of the token's volume through an upload session, part by part. The
    session id is kept in `state_file`, so a rerun after a crash asks the hub which parts it holds
    and sends only the others. After each part, writes {"sent": bytes this run, "have": bytes the
    hub holds} to `state_file`.progress."""
    headers = {"Authorization": f"Bearer {token}"}
    state = Path(state_file)
    size = os.path.getsize(file)
    if state.exists():
        resp = requests.get(f"{url}/api/volume/uploads/{json.loads(state.read_text())['id']}", headers=headers,
                            timeout=60)
    else:
        resp = requests.post(f"{url}/api/volume/uploads", json={"path": path, "size": size, "sha256": sha256},
                             headers=headers, timeout=60)
    resp.raise_for_status()
    session = resp.json()
    state.write_text(json.dumps({"id": session["id"]}))
    progress = Path(f"{state_file}.progress")
    have = len(session["received"]) * session["part_size"]
    sent = 0
    with open(file, "rb") as fh:
        for number, part_url in sorted(session["parts"].items(), key=lambda kv: int(kv[0])):
            fh.seek((int(number) - 1) * session["part_size"])
            data = fh.read(session["part_size"])
            requests.put(part_url, data=data, timeout=300).raise_for_status()  # no credentials: the URL is signed
            sent += len(data)
            have += len(data)
            tmp = progress.with_suffix(".tmp")
            tmp.write_text(json.dumps({"sent": sent, "have": have}))
            tmp.replace(progress)
    resp = requests.post(f"{url}/api/volume/uploads/{session['id']}/complete", headers=headers, timeout=600)
    resp.raise_for_status()
    print(json.dumps(resp.json()))


if __name__ == "__main__":
    upload_client(*sys.argv[1:7])
    sys.exit(0)

# --- the tests --------------------------------------------------------------------------------------

import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from urllib.parse import urlparse  # noqa: E402

import pytest  # noqa: E402

from tests.support.servers import PYTHON, ROOT  # noqa: E402
from tests.support.store import s3_client, stored_objects  # noqa: E402
from tests.support.volumes import MB, MIB, Vol, error_of, sha  # noqa: E402

GIB = 2**30
PART = 8 * MIB  # HUB_MULTIPART_CHUNK of the test servers


class Uploads(Vol):
    def create(self, path: str, data: bytes | None = None, **body) -> requests.Response:
        if data is not None:
            body = {"size": len(data), "sha256": sha(data)} | body
        return requests.post(f"{self.base}/uploads", json={"path": path, **body}, headers=self.headers(), timeout=60)

    def status(self, upload_id: str) -> requests.Response:
        return requests.get(f"{self.base}/uploads/{upload_id}", headers=self.headers(), timeout=60)

    def complete(self, upload_id: str) -> requests.Response:
        return requests.post(f"{self.base}/uploads/{upload_id}/complete", headers=self.headers(), timeout=600)

    def abort(self, upload_id: str) -> requests.Response:
        return requests.delete(f"{self.base}/uploads/{upload_id}", headers=self.headers(), timeout=60)

    def send_parts(self, session: dict, data: bytes, numbers=None) -> None:
        for n, url in session["parts"].items():
            if numbers is None or int(n) in numbers:
                start = (int(n) - 1) * session["part_size"]
                resp = requests.put(url, data=data[start:start + session["part_size"]], timeout=120)
                assert resp.ok, resp.text

    def upload(self, path: str, data: bytes) -> requests.Response:
        resp = self.create(path, data)
        if resp.status_code != 201:
            return resp
        self.send_parts(resp.json(), data)
        return self.complete(resp.json()["id"])


def multipart_uploads(hub) -> list[str]:
    """Multipart uploads the store still holds open (S3), or part directories (local)."""
    url = hub.env.get("HUB_STORAGE_URL")
    if not url:
        return sorted(p.name for p in (hub.data_dir / "objects" / ".uploads").iterdir())
    resp = s3_client(hub).list_multipart_uploads(Bucket=urlparse(url).netloc)
    return sorted(u["UploadId"] for u in resp.get("Uploads", []))


@pytest.fixture
def alice(hub, unique) -> Uploads:
    return Uploads(hub, hub.token(f"alice{unique}"))


@pytest.fixture
def bob(hub, unique) -> Uploads:
    return Uploads(hub, hub.token(f"bob{unique}"))


def limited(hub, name: str, quota: str = "30MB") -> Uploads:
    out = hub.manage("hub_token", name, "--quota", quota).stdout.strip().splitlines()
    return Uploads(hub, out[-1])


def test_it_uploads_a_file_in_parts_and_installs_it_atomically(hub, alice):
    open_before = multipart_uploads(hub)
    old, new = os.urandom(1000), os.urandom(2 * PART + 123)
    alice.put("model/weights.bin", old)
    resp = alice.create("model/weights.bin", new)
    assert resp.status_code == 201, resp.text
    session = resp.json()
    assert (session["status"], session["part_size"], session["part_count"], session["received"]) == (
        "open", PART, 3, [])
    assert sorted(session["parts"]) == ["1", "2", "3"]
    store_is_s3 = "HUB_STORAGE_URL" in hub.env
    # With S3 the bytes go straight to the store; with the local backend, through the hub.
    assert all(u.startswith(hub.url) != store_is_s3 for u in session["parts"].values())
    assert alice.quota()["reserved"] == len(new)

    alice.send_parts(session, new, numbers={1, 3})
    status = alice.status(session["id"]).json()
    assert status["received"] == [1, 3] and list(status["parts"]) == ["2"]
    assert alice.get("model/weights.bin").content == old  # nothing of the new file shows yet

    alice.send_parts(status, new)
    resp = alice.complete(session["id"])
    assert resp.status_code == 200, resp.text
    done = resp.json()
    assert (done["status"], done["entry"]["etag"], done["entry"]["size"]) == ("done", sha(new), len(new))
    assert alice.get("model/weights.bin").content == new
    q = alice.quota()
    assert (q["reserved"], q["used"]) == (0, len(new))  # the old file's bytes were given back
    # A retried completion (the first answer was lost) answers the same; the session is otherwise gone.
    assert alice.complete(session["id"]).json()["entry"]["etag"] == sha(new)
    assert alice.status(session["id"]).status_code == 404
    assert multipart_uploads(hub) == open_before


def test_it_resumes_the_callers_open_session_for_the_same_file(alice):
    data = os.urandom(PART + 10)
    first = alice.create("r.bin", data)
    assert first.status_code == 201
    alice.send_parts(first.json(), data, numbers={1})
    again = alice.create("r.bin", data)
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again.json()["received"] == [1]
    assert alice.quota()["reserved"] == len(data)  # reserved once
    other = alice.create("elsewhere.bin", data)
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    for upload_id in (first.json()["id"], other.json()["id"]):
        assert alice.abort(upload_id).status_code == 204
    assert alice.quota()["reserved"] == 0


def test_it_writes_bytes_the_caller_already_holds_without_uploading_them(alice, bob):
    data = os.urandom(PART + 1)
    assert alice.upload("a.bin", data).status_code == 200
    resp = alice.create("copy-of-a.bin", data)
    assert resp.status_code == 201
    assert (resp.json()["id"], resp.json()["status"], resp.json()["entry"]["etag"]) == (None, "done", sha(data))
    assert alice.get("copy-of-a.bin").content == data
    assert alice.quota()["used"] == len(data)
    # Knowing the hash is not holding the bytes: bob has to send them.
    resp = bob.create("a.bin", data)
    assert resp.status_code == 201 and resp.json()["status"] == "open"
    assert bob.abort(resp.json()["id"]).status_code == 204


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> tuple[Path, str]:
    """1 GiB on disk with its sha256: distinct 16 MiB blocks, cheap to generate."""
    path = tmp_path_factory.mktemp("big") / "1GiB.bin"
    h = hashlib.sha256()
    block = bytearray(os.urandom(16 * MIB))
    with open(path, "wb") as fh:
        for i in range(GIB // len(block)):
            block[:8] = i.to_bytes(8, "big")
            fh.write(block)
            h.update(block)
    return path, h.hexdigest()


@pytest.mark.slow
def test_it_resumes_a_killed_upload_of_1_gib_sending_less_than_half_again(hub, alice, big_file, tmp_path):
    open_before = multipart_uploads(hub)
    path, digest = big_file
    state = tmp_path / "session.json"
    progress = Path(f"{state}.progress")
    args = [PYTHON, __file__, hub.url, alice.token, "ckpt/1GiB.bin", str(path), digest, str(state)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    first = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while True:
        assert first.poll() is None, f"the client ended early: {first.communicate()}"
        assert time.monotonic() < deadline, "the first run made too little progress"
        if progress.exists() and json.loads(progress.read_text())["have"] >= 0.6 * GIB:
            break
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL

    upload_id = json.loads(state.read_text())["id"]
    status = alice.status(upload_id).json()
    assert 0.55 * GIB <= len(status["received"]) * PART < GIB
    assert alice.stat("ckpt/1GiB.bin").status_code == 404  # nothing visible until complete

    second = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    resent = json.loads(progress.read_text())["sent"]
    assert 0 < resent < GIB / 2, f"the resumed run sent {resent} bytes"
    assert json.loads(second.stdout.strip().splitlines()[-1])["entry"]["etag"] == digest

    resp = requests.get(alice.url("ckpt/1GiB.bin"), headers=alice.headers(), stream=True, timeout=600)
    assert resp.status_code == 200
    h = hashlib.sha256()
    for chunk in resp.iter_content(8 * MIB):
        h.update(chunk)
    assert h.hexdigest() == digest
    q = alice.quota()
    assert (q["used"], q["reserved"]) == (GIB, 0)
    assert multipart_uploads(hub) == open_before


def test_it_holds_the_quota_exactly_when_uploads_race_past_it(hub, unique):
    """20 uploads of 4 MB race for a 30 MB quota, half as single PUTs, half through sessions:
    exactly 7 fit; the others get 413 with the figures and leave neither bytes nor reservations."""
    open_before = multipart_uploads(hub)
    name = f"carl{unique}"
    carl = limited(hub, name)
    files = [os.urandom(4 * MB) for _ in range(20)]
    before = stored_objects(hub, "")

    def upload(i: int) -> requests.Response:
        return carl.put(f"race/{i}.bin", files[i]) if i % 2 else carl.upload(f"race/{i}.bin", files[i])

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(upload, range(20)))
    ok = [i for i, r in enumerate(results) if r.status_code in (200, 201)]
    refused = [r for r in results if r.status_code == 413]
    assert len(ok) == 7 and len(refused) == 13, [r.status_code for r in results]
    for r in refused:
        status, code, message = error_of(r)
        assert code == "QuotaExceeded" and f"quota exceeded for {name}:" in message
        assert "of 30 MB used" in message and "this upload needs 4 MB" in message
    q = carl.quota()
    assert (q["used"], q["reserved"]) == (28 * MB, 0)
    listed, _ = carl.ls_all("race")
    assert sorted(e["etag"] for e in listed) == sorted(sha(files[i]) for i in ok)
    new_objects = {k: v for k, v in stored_objects(hub, "").items() if k not in before}
    assert sorted(new_objects.values()) == [4 * MB] * 7  # the accepted files' bytes, nothing else
    assert multipart_uploads(hub) == open_before


@pytest.mark.parametrize("body, problem", [
    ({"size": -1}, "size"), ({"size": 10**30}, "size"), ({"size": "lots"}, "size"), ({"size": 1.5}, "size"),
    ({"sha256": "abc"}, "sha256"), ({"sha256": "G" * 64}, "sha256"), ({"part_size": 1}, "part_size"),
    ({"part_size": 5 * MIB, "size": 10**12}, "part_size"), ({"path": "../x"}, "path"), ({"path": "/abs"}, "path"),
    ({"path": ""}, "path"), ({"if_match": "a, b"}, "If-Match")])
def test_it_refuses_bad_upload_requests_before_reserving_anything(hub, body, problem):
    prober = Uploads(hub, hub.cached_token("volume-prober"))
    open_before = multipart_uploads(hub)
    good = {"path": "f.bin", "size": 10, "sha256": "0" * 64}
    resp = requests.post(f"{prober.base}/uploads", json=good | body, headers=prober.headers(), timeout=30)
    status, code, message = error_of(resp)
    assert status == 400 and problem in message, message
    assert prober.quota()["reserved"] == 0 and multipart_uploads(hub) == open_before


def test_it_refuses_an_upload_over_quota_before_any_byte_is_sent(hub, unique):
    open_before = multipart_uploads(hub)
    name = f"cleo{unique}"
    cleo = limited(hub, name)
    data_size = 31 * MB
    status, code, message = error_of(cleo.create("huge.bin", size=data_size, sha256="1" * 64))
    assert (status, code) == (413, "QuotaExceeded")
    assert f"quota exceeded for {name}: 0 B of 30 MB used" in message and "needs 31 MB" in message
    assert cleo.quota()["reserved"] == 0 and multipart_uploads(hub) == open_before


def test_it_ends_a_session_whose_bytes_do_not_match_and_releases_its_reservation(hub, alice):
    open_before = multipart_uploads(hub)
    truth, lie = os.urandom(PART + 100), os.urandom(PART + 100)
    before = stored_objects(hub, "")
    session = alice.create("x.bin", truth).json()
    alice.send_parts(session, lie)
    status, code, message = error_of(alice.complete(session["id"]))
    assert (status, code) == (422, "UnprocessableEntity") and sha(truth) in message
    assert alice.stat("x.bin").status_code == 404
    assert alice.status(session["id"]).status_code == 404
    assert alice.quota()["reserved"] == 0
    assert stored_objects(hub, "") == before and multipart_uploads(hub) == open_before


def test_it_keeps_a_session_open_until_its_parts_are_right(hub, alice):
    data = os.urandom(PART + 1000)
    session = alice.create("y.bin", data).json()
    status, code, message = error_of(alice.complete(session["id"]))
    assert (status, code) == (400, "BadRequest") and "have not been uploaded" in message

    # A part of the wrong length: the hub refuses it at once; S3 takes it and completion refuses it.
    resp = requests.put(session["parts"]["1"], data=data[:PART - 1], timeout=60)
    if resp.status_code == 400:
        assert "must be" in resp.json()["error"]
    else:
        assert resp.ok
        alice.send_parts(session, data, numbers={2})
        status, code, message = error_of(alice.complete(session["id"]))
        assert status == 400 and f"part 1 has {PART - 1} bytes" in message
    status = alice.status(session["id"]).json()
    assert 1 not in status["received"] and "1" in status["parts"]
    assert alice.quota()["reserved"] == len(data)  # still open: still reserved

    alice.send_parts(status, data)
    assert alice.complete(session["id"]).status_code == 200
    assert alice.get("y.bin").content == data
    assert alice.quota()["reserved"] == 0


def test_it_keeps_sessions_private_to_their_user(hub, alice, bob):
    data = os.urandom(1000)
    session = alice.create("mine.bin", data).json()
    sid = session["id"]
    for resp in (bob.status(sid), bob.complete(sid), bob.abort(sid), bob.status(str(uuid.uuid4())),
                 requests.put(f"{bob.base}/uploads/{sid}/parts/1", data=data, headers=bob.headers(), timeout=30)):
        assert error_of(resp)[:2] == (404, "NotFound")
    assert error_of(requests.get(f"{bob.base}/uploads/not-a-session", headers=bob.headers(), timeout=30))[0] == 404
    assert error_of(Uploads(hub, None).status(sid))[:2] == (401, "Unauthorized")
    # A forged or reused part URL is refused too (local backend: the hub signs its part URLs).
    tampered = session["parts"]["1"].replace("/parts/1?", "/parts/2?")
    if tampered.startswith(hub.url):
        assert requests.put(tampered, data=b"x", timeout=30).status_code == 404
    assert alice.status(sid).json()["received"] == []
    alice.send_parts(session, data)
    assert alice.complete(sid).status_code == 200


def test_it_aborts_sessions_and_releases_their_reservations(hub, alice):
    open_before = multipart_uploads(hub)
    data = os.urandom(PART + 5)
    session = alice.create("gone.bin", data).json()
    alice.send_parts(session, data, numbers={1})
    assert alice.quota()["reserved"] == len(data)
    assert alice.abort(session["id"]).status_code == 204
    assert alice.quota()["reserved"] == 0
    assert alice.status(session["id"]).status_code == 404
    assert alice.abort(session["id"]).status_code == 404
    assert error_of(alice.complete(session["id"]))[:2] == (404, "NotFound")
    assert multipart_uploads(hub) == open_before
    assert alice.stat("gone.bin").status_code == 404


def test_it_expires_idle_sessions_and_releases_their_reservations(hub, alice):
    open_before = multipart_uploads(hub)
    data = os.urandom(PART + 5)
    session = alice.create("idle.bin", data).json()
    alice.send_parts(session, data, numbers={1})
    assert alice.quota()["reserved"] == len(data)
    # A day passes without a word from the client; then the periodic task runs.
    out = hub.manage("shell", "-c", (
        "from datetime import timedelta; from django.utils import timezone; "
        "from hub.content.models import UploadSession; from hub.volumes.tasks import expire_volume_sessions; "
        f"UploadSession.objects.filter(pk='{session['id']}').update(expires=timezone.now() - timedelta(minutes=1)); "
        "print(expire_volume_sessions.delay().get())")).stdout
    assert out.strip().splitlines()[-1] == "1"
    assert alice.quota()["reserved"] == 0
    assert alice.status(session["id"]).status_code == 404
    assert multipart_uploads(hub) == open_before


def test_the_sweep_ends_an_old_session_whose_completion_died_and_releases_its_reservation(hub, alice):
    """A completion claimed the session and its server died (the state such a death leaves is written
    here; tests/test_faults.py kills a real server mid-completion). Past its expiry, the periodic task
    reopens and ends it like any idle session: reservation released, parts freed in the store."""
    open_before = multipart_uploads(hub)
    data = os.urandom(PART + 5)
    session = alice.create("claimed.bin", data).json()
    alice.send_parts(session, data)
    assert alice.quota()["reserved"] == len(data)
    out = hub.manage("shell", "-c", (
        "from datetime import timedelta; from django.utils import timezone; "
        "from hub.content.models import UploadSession; from hub.volumes.tasks import expire_volume_sessions; "
        f"UploadSession.objects.filter(pk='{session['id']}').update(state='done', lease='dead-worker', "
        "claimed=timezone.now() - timedelta(hours=1), expires=timezone.now() - timedelta(minutes=1)); "
        "print(expire_volume_sessions.delay().get())")).stdout
    assert out.strip().splitlines()[-1] == "1"
    assert alice.quota()["reserved"] == 0
    assert alice.status(session["id"]).status_code == 404
    assert multipart_uploads(hub) == open_before


def test_it_takes_the_sha256_at_completion_so_clients_hash_while_uploading(hub, alice):
    data = os.urandom(2 * PART + 7)
    before = stored_objects(hub, "")
    resp = alice.create("late.bin", size=len(data))  # no sha256 yet
    assert resp.status_code == 201, resp.text
    session = resp.json()
    alice.send_parts(session, data)
    wrong = sha(data[:-1])
    status, code, message = error_of(requests.post(f"{alice.base}/uploads/{session['id']}/complete",
                                                   json={"sha256": wrong}, headers=alice.headers(), timeout=60))
    assert status == 422 and wrong in message
    assert alice.stat("late.bin").status_code == 404 and alice.quota()["reserved"] == 0
    assert stored_objects(hub, "") == before

    session = alice.create("late.bin", size=len(data)).json()
    alice.send_parts(session, data)
    resp = requests.post(f"{alice.base}/uploads/{session['id']}/complete", json={"sha256": sha(data)},
                         headers=alice.headers(), timeout=60)
    assert resp.status_code == 200, resp.text
    assert alice.get("late.bin").content == data


def test_without_any_sha256_the_hub_hashes_the_stored_bytes(hub, alice):
    data = os.urandom(2 * PART + 11)
    session = alice.create("unhashed.bin", size=len(data)).json()
    alice.send_parts(session, data)
    resp = requests.post(f"{alice.base}/uploads/{session['id']}/complete", headers=alice.headers(), timeout=60)
    assert resp.status_code == 200, resp.text
    assert resp.json()["entry"]["etag"] == sha(data)
    assert alice.stat("unhashed.bin").json()["etag"] == sha(data)
    assert alice.get("unhashed.bin").content == data
    assert alice.quota()["reserved"] == 0
    # completing again (a retry after a lost response) returns the same file
    again = requests.post(f"{alice.base}/uploads/{session['id']}/complete", headers=alice.headers(), timeout=60)
    assert again.status_code == 200 and again.json()["entry"]["etag"] == sha(data)
