"""Catalog entries fetched from upstream on first use (hub.mirrors.ondemand).

A second live hub is the upstream (the tests cannot reach huggingface.co): it holds a tiny Qwen2
model and a Chinese dialogue dataset under their catalog ids. The hub under test ("downstream",
on each backend) has the seed catalog and nothing else, and reaches the upstream through a TCP
relay that the tests slow down and cut. The upstream's access log (with each request's Range
header) counts the transfers. Everything is read through the stock clients, the `hub` CLI and a
FUSE mount, and compared byte for byte with what was published."""
from __future__ import annotations

import hashlib
import html
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import RepositoryNotFoundError

from storage.sizes import format_size
from tests.support import hub_cli
from tests.support.files import read_tree
from tests.support.mount import Mounts
from tests.support.mount import client_env as mount_env
from tests.support.relay import Relay
from tests.support.servers import (
    ROOT,
    SERVER_ARGS,
    Hub,
    base_env,
    free_port,
    fresh_database,
    launch_hub,
    scratch_bucket,
)

MB = 2**20
MODEL = "Qwen/Qwen2-0.5B-Instruct"
DATASET = "BelleGroup/multiturn_chat_0.8M"
NOT_UPSTREAM = "THUDM/chatglm3-6b"  # in the catalog, never published upstream
RECHECK = 2  # seconds between checks of the upstream's branch, in these tests
BACKENDS = os.environ.get("HUB_TEST_BACKENDS", "embedded,pg_rgw").split(",")
ACCESS_LOG = ("--access-logfile", "-", "--access-logformat", '"%(r)s" %(s)s range=%({range}i)s')


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "HUGGINGFACE_", "DJANGO_"))}
    return env | extra


ENTRIES = {MODEL, DATASET, NOT_UPSTREAM, "baichuan-inc/Baichuan-7B", "BelleGroup/train_0.5M_CN",
           "BelleGroup/train_1M_CN"}


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory) -> str:
    """The entries these tests use, from the seed catalog (loading all of it costs every hub seconds)."""
    import yaml

    doc = yaml.safe_load((ROOT / "hub/catalog/seed/catalog.yaml").read_text(encoding="utf-8"))
    path = tmp_path_factory.mktemp("od-catalog") / "catalog.yaml"
    path.write_text(yaml.safe_dump({k: [e for e in v if e["repo_id"] in ENTRIES] for k, v in doc.items()},
                                   allow_unicode=True), encoding="utf-8")
    return str(path)


def seed(hub: Hub, catalog_file: str) -> None:
    hub.manage("seed_catalog", "--no-samples", "--file", catalog_file)


# --- the upstream ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def upstream(tmp_path_factory, catalog_file) -> Hub:
    """A live hub with the catalog's namespaces, an operator (ops) and the published entries."""
    data = tmp_path_factory.mktemp("od-upstream")
    with launch_hub("upstream", base_env() | {"HUB_DATA_DIR": str(data)}, data,
                    gunicorn_args=SERVER_ARGS + ACCESS_LOG) as hub:
        hub.manage("hub_init", "--admin", "ops")
        seed(hub, catalog_file)
        hub.ops = hub.token("ops")
        yield hub


@pytest.fixture(scope="module")
def published(upstream, tmp_path_factory) -> dict:
    """The tiny Qwen2 model (saved by transformers) and a parquet dataset of Chinese dialogues,
    pushed upstream with huggingface_hub."""
    work = tmp_path_factory.mktemp("od-published")
    model_dir = work / "model"
    script = textwrap.dedent(f"""
        import torch
        from transformers import Qwen2Config, Qwen2ForCausalLM
        torch.manual_seed(7)
        config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
        Qwen2ForCausalLM(config).save_pretrained({str(model_dir)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"instruction": f"第{i}轮对话：你好，请介绍一下你自己。", "input": "", "output": f"你好！我是助手{i}号。"}
            for i in range(2000)]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    api = upstream.api(upstream.ops)
    api.delete_repo(NOT_UPSTREAM)  # (the upstream has the seed catalog too)
    model_commit = api.upload_folder(folder_path=str(model_dir), repo_id=MODEL, commit_message="tiny qwen2")
    api.upload_file(path_or_fileobj=buf.getvalue(), path_in_repo="data/train-00000-of-00001.parquet",
                    repo_id=DATASET, repo_type="dataset")
    return {"model_dir": model_dir, "model_files": read_tree(model_dir), "rows": rows,
            "parquet": buf.getvalue(), "model_commit": model_commit.oid}


def publish(upstream: Hub, files: dict[str, bytes], repo_id: str = MODEL, repo_type: str = "model") -> str:
    """One more upstream commit; returns its id."""
    from huggingface_hub import CommitOperationAdd

    ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in files.items()]
    return upstream.api(upstream.ops).create_commit(repo_id, operations=ops, commit_message="more",
                                                    repo_type=repo_type).oid


def transfers(upstream: Hub, path: str) -> list[str]:
    """The upstream's GETs of the file at `path`, each with its Range header ("-" for none)."""
    log = upstream.log_path.read_text(errors="replace")
    return re.findall(rf'"GET /[^ ]*/resolve/[0-9a-f]{{40}}/{re.escape(path)} HTTP/[\d.]+" \d+ range=(\S+)', log)


# --- the hub under test ----------------------------------------------------------------------------

def downstream_env(relay: Relay, data: Path, **extra: str) -> dict[str, str]:
    return base_env() | {"HUB_DATA_DIR": str(data), "HUB_ONDEMAND": "1", "HUB_MIRROR_UPSTREAM": relay.url,
                         "HUB_ONDEMAND_RECHECK": str(RECHECK), "HUB_MIRROR_STALE": "4",
                         "HUB_ONDEMAND_BLOCK": "4MiB", "HUB_ONDEMAND_TIMEOUT": "15"} | extra


@pytest.fixture(scope="module")
def relay(upstream) -> Relay:
    r = Relay(("127.0.0.1", upstream.port)).start()
    yield r
    r.cut()


@pytest.fixture
def relay_mended(relay):
    """The relay at full speed and connected again after the test, whatever it did."""
    yield relay
    relay.rate = None
    if relay.sock is None:
        relay.start()


@pytest.fixture(scope="module")
def downstreams(request, relay, published, catalog_file, tmp_path_factory):
    """Hubs under test, one per backend, started when a test first asks for one (kept for the module)."""
    import contextlib

    started: dict[str, Hub] = {}
    with contextlib.ExitStack() as stack:
        def of(kind: str) -> Hub:
            if kind not in BACKENDS:
                pytest.skip(f"{kind} backend not selected in HUB_TEST_BACKENDS")
            if kind in started:
                return started[kind]
            data = tmp_path_factory.mktemp(f"od-{kind}")
            env = downstream_env(relay, data)
            if kind == "pg_rgw":
                rgw_env = request.getfixturevalue("rgw_env")
                suffix = uuid.uuid4().hex[:10]
                bucket = stack.enter_context(scratch_bucket(rgw_env, f"hub-od-{suffix}"))
                db = stack.enter_context(fresh_database(f"hub_od_{suffix}"))
                env |= rgw_env | {"DATABASE_URL": db, "HUB_STORAGE_URL": f"s3://{bucket}"}
            hub = stack.enter_context(launch_hub(f"down-{kind}", env, data))
            seed(hub, catalog_file)
            started[kind] = hub
            return hub

        yield of


@pytest.fixture(params=["embedded", "pg_rgw"])
def down(request, downstreams) -> Hub:
    return downstreams(request.param)


@pytest.fixture
def down_embedded(downstreams) -> Hub:
    return downstreams("embedded")


def get(hub: Hub, path: str, **headers: str) -> requests.Response:
    return requests.get(f"{hub.url}/{path}", headers=headers, timeout=120)


def page(hub: Hub, repo_id: str, session: requests.Session | None = None) -> str:
    r = (session or requests).get(f"{hub.url}/{repo_id}", timeout=60)
    assert r.status_code == 200, r.text[:500]
    return r.text


def listed(hub: Hub, path: str, repo: str = MODEL, prefix: str = "") -> None:
    """Waits until the hub lists `path` (it checks the upstream RECHECK seconds after its last check,
    on a thread of its own, serving its pin meanwhile)."""
    deadline = time.time() + 30
    while requests.head(f"{hub.url}/{prefix}{repo}/resolve/main/{path}", timeout=30).status_code != 200:
        assert time.time() < deadline, f"{hub.name} never listed {path}"
        time.sleep(0.3)


def fresh_file(upstream: Hub, size: int, *hubs: Hub) -> tuple[str, bytes]:
    """A new large file published upstream, and the wait until these hubs list it."""
    name = f"shards/part-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(size)
    publish(upstream, {name: data})
    time.sleep(RECHECK + 0.2)
    for hub in hubs:
        listed(hub, name)
    return name, data


# --- the stock clients ------------------------------------------------------------------------------

def stock_libraries_load_it(down: Hub, published: dict, tmp_path: Path) -> None:
    """from_pretrained gets the weights upstream has; load_dataset reads the dataset's rows."""
    script = textwrap.dedent(f"""
        import json, torch
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM
        here = AutoModelForCausalLM.from_pretrained({MODEL!r})
        there = AutoModelForCausalLM.from_pretrained({str(published["model_dir"])!r})
        a, b = here.state_dict(), there.state_dict()
        ds = load_dataset({DATASET!r}, split="train")
        print(json.dumps({{"same": sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in b),
                          "tensors": len(b), "rows": len(ds), "first": ds[0], "last": ds[-1]}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env=clean_env(HF_ENDPOINT=down.url, HF_HOME=str(tmp_path / "hf"),
                                        HF_HUB_DISABLE_TELEMETRY="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["same"] and got["tensors"] > 0
    assert got["rows"] == len(published["rows"]) and got["first"] == published["rows"][0]
    assert got["last"] == published["rows"][-1]


def test_a_catalog_entry_never_mirrored_works_with_transformers_datasets_and_the_cli(down, upstream, published,
                                                                                     tmp_path):
    """A fresh hub with only the seed catalog: repo info lists upstream's files (pinned as a commit
    here), from_pretrained loads the weights upstream has, load_dataset reads its rows, `hub pull`
    gets every byte, and the page says what is local."""
    before = page(down, MODEL)
    assert 'id="ondemand"' in before and "Fetched on first use" in before and "0 of 1 large file" in before

    info = down.api().model_info(MODEL, files_metadata=True)
    theirs = upstream.api().model_info(MODEL, files_metadata=True)
    assert {(s.rfilename, s.size) for s in info.siblings} == {(s.rfilename, s.size) for s in theirs.siblings}
    assert info.sha != theirs.sha  # a commit of this hub's own, pinned to upstream's
    commits = down.api().list_repo_commits(MODEL)
    assert f"Upstream {theirs.sha[:12]}" in commits[0].title

    if down.name == "down-embedded":  # (once: transformers and datasets make the same requests on both backends)
        stock_libraries_load_it(down, published, tmp_path)
    else:
        got = hf_hub_download(DATASET, "data/train-00000-of-00001.parquet", repo_type="dataset", endpoint=down.url,
                              token=False, cache_dir=str(tmp_path / "c"))
        assert Path(got).read_bytes() == published["parquet"]

    env = hub_cli.client_env(down, None, tmp_path / "cli")
    pulled = Path(hub_cli.ok(hub_cli.run(env, "pull", MODEL)).stdout.strip())
    files = read_tree(pulled)
    assert {p: d for p, d in files.items() if p in published["model_files"]} == published["model_files"]

    # The fetched file is stored once the reads that followed it are done (on RGW, a PUT after the
    # last byte went out): the page's count catches up within moments.
    deadline = time.time() + 30
    while "1 of 1 large file" not in (after := page(down, MODEL)):
        assert time.time() < deadline, re.search(r'id="ondemand".{0,900}', after, re.S).group(0)
        time.sleep(0.3)


def test_parallel_first_readers_cause_one_upstream_transfer(down, upstream, tmp_path):
    """Eight clients ask for a file nobody fetched yet at the same moment: each gets every byte,
    the upstream sends it once."""
    name, data = fresh_file(upstream, 24 * MB + 3, down)
    url = f"{MODEL}/resolve/main/{name}"
    results: list[bytes | Exception] = [b""] * 8
    go = threading.Barrier(8)

    def read(i: int) -> None:
        go.wait()
        try:
            if i == 0:  # one of them the stock client, the rest plain HTTP
                results[i] = Path(hf_hub_download(MODEL, name, endpoint=down.url, token=False,
                                                  cache_dir=str(tmp_path / "c"))).read_bytes()
            else:
                results[i] = get(down, url).content
        except Exception as err:  # noqa: BLE001 - reported below
            results[i] = err

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(r == data for r in results), [r if isinstance(r, Exception) else len(r) for r in results]
    assert transfers(upstream, name) == ["-"]
    # From now on it is a stored blob: no more upstream traffic, ranges included.
    assert get(down, url, Range="bytes=1000-1999").content == data[1000:2000]
    assert get(down, url).content == data
    assert transfers(upstream, name) == ["-"]


def test_a_new_upstream_commit_becomes_a_new_commit_and_fetched_bytes_are_reused(down, upstream):
    """`main` follows upstream (checked every RECHECK seconds): a new upstream commit is a new
    commit here, with the new file listed at once and the unchanged files not fetched again."""
    name, data = fresh_file(upstream, 5 * MB, down)
    assert get(down, f"{MODEL}/resolve/main/{name}").content == data
    first = down.api().model_info(MODEL).sha
    changed = b'{"note": "' + uuid.uuid4().hex.encode() + b'"}'
    new_commit = publish(upstream, {"notes.json": changed})
    time.sleep(RECHECK + 0.2)
    deadline = time.time() + 30
    while (info := down.api().model_info(MODEL)).sha == first:  # (the first request after RECHECK starts the check)
        assert time.time() < deadline, "the new upstream commit never came"
        time.sleep(0.3)
    assert "notes.json" in {s.rfilename for s in info.siblings}
    assert f"Upstream {new_commit[:12]}" in down.api().list_repo_commits(MODEL)[0].title
    assert get(down, f"{MODEL}/resolve/main/notes.json").content == changed
    assert get(down, f"{MODEL}/resolve/main/{name}").content == data
    assert transfers(upstream, name) == ["-"]
    # The first pin stays readable by its commit id; the upstream's commit id names the new one.
    assert get(down, f"{MODEL}/resolve/{first}/{name}").content == data
    assert down.api().model_info(MODEL, revision=new_commit).sha == info.sha


def test_an_entry_the_upstream_lacks_says_so_and_an_unreachable_upstream_is_a_503(down, relay_mended):
    with pytest.raises(RepositoryNotFoundError) as err:
        down.api().model_info(NOT_UPSTREAM)
    assert NOT_UPSTREAM in str(err.value)
    assert "its upstream does not have it" in str(err.value)
    relay_mended.cut()
    r = get(down, "baichuan-inc/Baichuan-7B/resolve/main/config.json")
    assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0
    assert relay_mended.url in r.headers["X-Error-Message"] and "cannot be reached" in r.headers["X-Error-Message"]
    assert "cannot be reached" in page(down, "baichuan-inc/Baichuan-7B")  # the page says why, with status 200


def test_a_hub_without_internet_seeds_its_samples_and_says_the_rest_cannot_be_fetched(tmp_path):
    """scripts/run.sh's case on a machine with no way out: fetching on first use on (its default), the
    upstream unreachable. The samples that are also seeded entries (scikit-learn/iris) are served from
    their own commits, never pinned from upstream; an entry without files says upstream cannot be
    reached, on its page (200) and to clients (503)."""
    import yaml

    doc = yaml.safe_load((ROOT / "hub/catalog/seed/catalog.yaml").read_text(encoding="utf-8"))
    wanted = {"scikit-learn/iris", "scikit-learn/breast-cancer-wisconsin", MODEL}
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(yaml.safe_dump({k: [e for e in v if e["repo_id"] in wanted] for k, v in doc.items()},
                                      allow_unicode=True), encoding="utf-8")
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    data = tmp_path / "offline"
    # (Behind a proxy: the pages' snippets name the public URL, not the address the server sees.)
    public = "https://hub.example.cn"
    env = base_env() | {"HUB_DATA_DIR": str(data), "HUB_ONDEMAND": "1", "HUB_MIRROR_UPSTREAM": nowhere,
                        "HUB_ONDEMAND_TIMEOUT": "3", "HUB_PUBLIC_URL": public}
    with launch_hub("offline", env, data) as hub:
        out = hub.manage("seed_catalog", "--file", str(catalog), check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "sample scikit-learn/iris" in out.stdout
        r = get(hub, "datasets/scikit-learn/iris/resolve/main/iris.csv")
        assert r.status_code == 200 and r.text.startswith("sepal length (cm),")
        iris = page(hub, "datasets/scikit-learn/iris")
        assert "Fetched on first use" not in iris
        assert f"export HF_ENDPOINT={public}\n" in html.unescape(iris) and hub.url not in iris
        r = get(hub, f"{MODEL}/resolve/main/config.json")
        assert r.status_code == 503 and nowhere in r.headers["X-Error-Message"]
        assert "cannot be reached" in page(hub, MODEL)


# --- failures in the middle -------------------------------------------------------------------------

def test_a_cut_upstream_fails_the_read_with_503_and_the_fetch_resumes_when_it_is_back(down_embedded, upstream,
                                                                                      relay_mended):
    down = down_embedded
    name, data = fresh_file(upstream, 24 * MB, down)
    url = f"{down.url}/{MODEL}/resolve/main/{name}"
    relay_mended.rate = 6 * MB
    got = bytearray()
    with requests.get(url, stream=True, timeout=60) as r, pytest.raises(requests.RequestException):
        assert r.status_code == 200
        for chunk in r.iter_content(1 << 16):
            got += chunk
            if len(got) >= 6 * MB and relay_mended.sock is not None:
                relay_mended.cut()
    assert 6 * MB <= len(got) < len(data) and bytes(got) == data[:len(got)]  # cut short, never wrong
    time.sleep(3)  # (the fetch retries in place, then gives up)
    r = requests.get(url, timeout=60)
    assert r.status_code == 503 and r.headers["Retry-After"], (r.status_code, r.text[:300])
    assert relay_mended.url in r.headers["X-Error-Message"]
    relay_mended.rate = None
    relay_mended.start()
    assert requests.get(url, timeout=120).content == data
    ranges = transfers(upstream, name)
    assert ranges[0] == "-" and any(re.fullmatch(r"bytes=(\d+)-", x) and int(x[6:-1]) >= 4 * MB for x in ranges[1:]), \
        ranges  # resumed from the bytes already here


def test_a_killed_workers_fetch_is_finished_by_the_next_reader(down_embedded, upstream, relay_mended):
    down = down_embedded
    name, data = fresh_file(upstream, 16 * MB, down)
    url = f"{down.url}/{MODEL}/resolve/main/{name}"
    relay_mended.rate = 4 * MB
    with requests.get(url, stream=True, timeout=60) as r:
        got = 0
        for chunk in r.iter_content(1 << 16):
            got += len(chunk)
            if got >= MB:  # the fetch is under way
                break
        for pid in down.worker_pids()[1:]:  # every gunicorn worker, SIGKILLed (the master starts new ones)
            os.kill(pid, signal.SIGKILL)
    relay_mended.rate = None
    deadline = time.time() + 60
    while True:
        try:
            r = requests.get(url, timeout=120)
            if r.status_code == 200:
                break
        except requests.RequestException:
            pass
        assert time.time() < deadline, "the fetch was never finished"
        time.sleep(0.5)
    assert r.content == data
    ranges = transfers(upstream, name)
    assert ranges[0] == "-" and any(x.startswith("bytes=") and x != "bytes=0-" for x in ranges[1:]), ranges


def test_a_range_far_into_a_file_is_served_before_the_whole_file_arrived(down_embedded, upstream, relay_mended):
    """The upstream sends 8 MB/s: a range at the end of a 40 MB file comes back by a ranged upstream
    read of its block while the whole file is still on its way (the page still counts it remote)."""
    down = down_embedded
    name, data = fresh_file(upstream, 40 * MB, down)
    url = f"{MODEL}/resolve/main/{name}"
    relay_mended.rate = 8 * MB
    assert get(down, url, Range="bytes=0-99").content == data[:100]  # starts the fetch
    status = page(down, MODEL)
    remote_before = int(re.search(r"(\d+) of (\d+) large files?", status).group(2)) - int(
        re.search(r"(\d+) of \d+ large files?", status).group(1))
    r = get(down, url, Range=f"bytes={38 * MB}-{38 * MB + 999}")
    assert r.status_code == 206 and r.content == data[38 * MB:38 * MB + 1000]
    status = page(down, MODEL)
    remote_now = int(re.search(r"(\d+) of (\d+) large files?", status).group(2)) - int(
        re.search(r"(\d+) of \d+ large files?", status).group(1))
    assert remote_now == remote_before  # answered before the whole file was stored
    assert f"bytes={36 * MB}-{40 * MB - 1}" in transfers(upstream, name)  # its 4 MiB block
    relay_mended.rate = None
    assert get(down, url).content == data


# --- the budget, pinning, mounts --------------------------------------------------------------------

@pytest.fixture(scope="module")
def operated(relay, upstream, published, catalog_file, tmp_path_factory) -> Hub:
    """A hub whose operator set a budget of 40 MiB, an upstream token (the upstream's operator's) and
    which entries may be fetched (the BelleGroup namespace and one model)."""
    data = tmp_path_factory.mktemp("od-operated")
    with launch_hub("operated", downstream_env(relay, data, HUB_ONDEMAND_BUDGET="40MiB", HUB_ONDEMAND_TOKEN=upstream.ops,
                                               HUB_ONDEMAND_ALLOW=f"BelleGroup,{MODEL}"), data) as hub:
        seed(hub, catalog_file)
        yield hub


def test_a_gated_upstream_entry_is_fetched_with_the_operators_token_and_gated_here_too(operated, down, upstream):
    repo = "BelleGroup/train_1M_CN"
    data = os.urandom(2 * MB)
    name = f"data/train-{uuid.uuid4().hex[:6]}.bin"
    publish(upstream, {name: data}, repo_id=repo, repo_type="dataset")
    upstream.api(upstream.ops).update_repo_settings(repo, gated="auto", repo_type="dataset")
    url = f"datasets/{repo}/resolve/main/{name}"
    # Without an operator token: refused, saying why.
    r = get(down, url)
    assert r.status_code == 403 and r.headers["X-Error-Code"] == "GatedRepo"
    assert "HUB_ONDEMAND_TOKEN" in r.headers["X-Error-Message"]
    # With one: pinned, gated here as upstream, served to users who accepted its conditions.
    time.sleep(RECHECK + 0.2)
    get(operated, url)  # (pinned before by the other backend's run: this starts the check)
    deadline = time.time() + 30
    while name not in {s.rfilename for s in operated.api().dataset_info(repo).siblings}:
        assert time.time() < deadline
        time.sleep(0.3)
    assert get(operated, url).headers.get("X-Error-Code") == "GatedRepo"
    assert operated.api().dataset_info(repo).gated == "auto"
    user = f"bob{uuid.uuid4().hex[:6]}"
    bob = operated.token(user)
    assert get(operated, url, Authorization=f"Bearer {bob}").status_code == 403
    s = operated.session(user)  # an auto gate opens once its conditions are accepted on its page
    r = s.post(f"{operated.url}/datasets/{repo}/access", data={"csrfmiddlewaretoken": s.cookies["csrftoken"]},
               headers={"Referer": f"{operated.url}/datasets/{repo}"}, timeout=30)
    assert r.status_code == 200, r.text[:300]
    got = get(operated, url, Authorization=f"Bearer {bob}")
    assert got.status_code == 200 and got.content == data


def test_entries_the_operator_did_not_allow_wait_for_a_mirror(operated, upstream):
    r = get(operated, "baichuan-inc/Baichuan-7B/resolve/main/config.json")
    assert r.status_code == 404 and "ask an operator to mirror it" in r.headers["X-Error-Message"]
    assert "Fetched on first use" not in page(operated, "baichuan-inc/Baichuan-7B")
    assert not re.search(r'"GET /api/models/baichuan-inc/Baichuan-7B', upstream.log_path.read_text(errors="replace"))


def test_over_the_budget_least_recently_used_unreferenced_bytes_are_evicted(operated, upstream):
    """Budget 40 MiB, files of 16 MiB: fetching a third evicts the least recently used one that no
    user repo references (B is older, but a user pushed the same bytes); it is fetched again when
    read again, and B never is."""
    names = {k: f"budget/{k}-{uuid.uuid4().hex[:6]}.bin" for k in "ABC"}
    # C's size differs so that "B and C are here" (A evicted) reads differently on the page from
    # "A and B are here" (C streamed but not stored yet).
    data = {k: os.urandom((20 if k == "C" else 16) * MB) for k in "ABC"}
    publish(upstream, {names[k]: data[k] for k in "ABC"})
    time.sleep(RECHECK + 0.2)
    hub = operated
    for k in "ABC":
        listed(hub, names[k])

    def read(k: str) -> bytes:
        return get(hub, f"{MODEL}/resolve/main/{names[k]}").content

    assert read("B") == data["B"]
    time.sleep(0.05)
    assert read("A") == data["A"]
    alice = hub.token("alice")
    api = hub.api(alice)
    api.create_repo("alice/keep")
    api.upload_file(path_or_fileobj=data["B"], path_in_repo="b.bin", repo_id="alice/keep")
    assert read("C") == data["C"]
    want = 'id="ondemand-local">2 of '
    want_bytes = f"({format_size(len(data['B']) + len(data['C']))} of "
    deadline = time.time() + 20
    while not (want in (text := page(hub, MODEL)) and want_bytes in text):
        assert time.time() < deadline, re.search(r'id="ondemand-local">.*?\)', text, re.S).group(0)
        time.sleep(0.2)
    assert read("B") == data["B"] and read("A") == data["A"]
    assert len(transfers(upstream, names["B"])) == 1
    assert len(transfers(upstream, names["A"])) == 2  # evicted, then fetched again


def test_an_operator_pins_an_entry_from_its_page(down_embedded, upstream):
    down = down_embedded
    repo = "BelleGroup/train_0.5M_CN"
    publish(upstream, {"data/train.parquet": os.urandom(3 * MB), "README.md": b"# belle\n"}, repo_id=repo,
            repo_type="dataset")
    repo_page = f"datasets/{repo}"
    before = page(down, repo_page)
    assert "Fetched on first use" in before and "0 of 1 large file" in before
    assert "ondemand-pin" not in before  # only operators see the button
    down.manage("hub_init", "--admin", "ops2")
    s = down.session("ops2")
    r = s.post(f"{down.url}/{repo_page}/pin", data={"csrfmiddlewaretoken": s.cookies["csrftoken"]},
               headers={"Referer": f"{down.url}/{repo_page}"}, timeout=60)
    assert r.status_code == 200 and "is pinned" in r.text
    deadline = time.time() + 60
    while "1 of 1 large file" not in (text := page(down, repo_page, s)):
        assert time.time() < deadline, text
        time.sleep(0.3)
    assert "Pinned: kept on this hub" in text and "ondemand-pin" not in text


def test_a_mount_reads_an_entry_never_mirrored(down_embedded, upstream, published, tmp_path):
    down = down_embedded
    from tests.support.mount import _fuse_missing

    if (why := _fuse_missing()) is not None:
        pytest.fail(f"FUSE is needed: {why}")
    name, data = fresh_file(upstream, 12 * MB + 5, down)
    mounts = Mounts(tmp_path / "mnt")
    mounts.base.mkdir()
    try:
        m = mounts.mount(mount_env(down, down.token("mounter"), tmp_path / "cache"), MODEL, "qwen")
        assert (m / name).read_bytes() == data
        assert (m / "config.json").read_bytes() == published["model_files"]["config.json"]
    finally:
        mounts.cleanup()
    assert len(transfers(upstream, name)) >= 1


def test_two_web_replicas_pin_once_and_fetch_once(downstreams, upstream, relay, tmp_path):
    """Two replicas (one database, one bucket, a disk each: the pg_rgw hub and a second server) asked
    at once about an entry neither has seen: one pin commit; one upstream transfer of the whole file,
    the other replica's readers served by ranged reads of the upstream meanwhile (it cannot follow a
    partial file on another machine's disk)."""
    a = downstreams("pg_rgw")
    repo = "BelleGroup/train_0.5M_CN"
    name = f"shards/part-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(24 * MB)
    publish(upstream, {name: data}, repo_id=repo, repo_type="dataset")
    url = f"datasets/{repo}/resolve/main/{name}"
    with launch_hub("b", a.env | {"HUB_DATA_DIR": str(tmp_path / "b")}, tmp_path / "b") as b:
        hubs = [a, b, a, b, a, b]
        go = threading.Barrier(len(hubs))
        shas: list = [None] * len(hubs)

        def info(i: int) -> None:
            go.wait()
            shas[i] = hubs[i].api().dataset_info(repo).sha

        threads = [threading.Thread(target=info, args=(i,)) for i in range(len(hubs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(set(shas)) == 1 and shas[0] is not None, shas
        commits = a.api().list_repo_commits(repo, repo_type="dataset")
        assert sum(c.title.startswith("Upstream ") for c in commits) == 1, [c.title for c in commits]

        relay.rate = 16 * MB  # (long enough for the readers to meet)
        got: list = [None] * len(hubs)
        go = threading.Barrier(len(hubs))

        def read(i: int) -> None:
            go.wait()
            got[i] = get(hubs[i], url).content

        threads = [threading.Thread(target=read, args=(i,)) for i in range(len(hubs))]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
        finally:
            relay.rate = None
        assert all(g == data for g in got), [len(g or b"") for g in got]
        ranges = transfers(upstream, name)
        assert ranges.count("-") == 1 and all(x.startswith("bytes=") for x in ranges if x != "-"), ranges
        assert len(ranges) <= 1 + 3, ranges  # the other replica's three readers at most
