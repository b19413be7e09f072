"""The seed catalog: the file itself, `manage.py seed_catalog` against live hubs (idempotent), and the
offline samples loaded by the stock transformers client."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import requests
import yaml

from hub.catalog import seed
from tests.conftest import one_backend

REQUIRED = {
    "datasets": ["ILSVRC/imagenet-1k"],
    "models": ["THUDM/chatglm3-6b", "baichuan-inc/Baichuan2-7B-Chat", "Qwen/Qwen-7B-Chat", "hfl/chinese-llama-2-7b",
               "hfl/chinese-alpaca-2-7b"],
}


def test_the_seed_file_lists_what_the_issue_asks_for() -> None:
    items = seed.load()
    datasets = {i.repo_id: i for i in items if i.type == "dataset"}
    models = {i.repo_id: i for i in items if i.type == "model"}
    assert len(datasets) >= 300 and len(models) >= 50
    for repo_id in REQUIRED["datasets"]:
        assert repo_id in datasets
    for repo_id in REQUIRED["models"]:
        assert repo_id in models
    assert any("coco" in r.lower() and "2017" in (d.data.title + d.data.summary) for r, d in datasets.items())
    chinese_dialogue = [d for d in datasets.values() if "zh" in d.data.languages
                        and any(w in (d.data.title + d.data.summary).lower() for w in ("dialogue", "conversation", "chat"))]
    assert len(chinese_dialogue) >= 3
    for family in ("chatglm3", "baichuan2", "qwen", "chinese-llama", "chinese-alpaca"):
        assert any(family in r.lower() for r in models), family
    # Every entry is checkable: a title and a summary at least, and an upstream id to look it up by.
    assert all(i.data.title and i.data.summary and i.data.upstream_id == i.repo_id for i in items)
    # Every Chinese entry speaks Chinese: a Chinese title and summary (written for this catalog).
    cjk = re.compile(r"[\u4e00-\u9fff]")
    untranslated = [i.repo_id for i in items if "zh" in i.data.languages
                    and not (cjk.search(i.data.title_zh) and cjk.search(i.data.summary_zh))]
    assert not untranslated, untranslated
    assert all(cjk.search(i.data.summary_zh) for i in items if i.data.summary_zh)


def test_a_malformed_seed_file_is_refused_with_the_entry_named(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"datasets": [{"repo_id": "ok/fine", "title": "Fine"},
                                                {"repo_id": "no-slash", "title": "Broken"}]}))
    with pytest.raises(seed.SeedError, match=r"datasets\[1\].*NAMESPACE/NAME"):
        seed.load(bad)
    bad.write_text(yaml.safe_dump({"models": [{"repo_id": "a/b", "modality": ["smell"]}]}))
    with pytest.raises(seed.SeedError, match="unknown modality"):
        seed.load(bad)


def test_the_sample_datasets_cards_state_their_files_shape(tmp_path) -> None:
    """Each generated dataset card says how many rows and columns its CSV has, and its size
    category: those figures must be the files' own (they were one column short, and the 1,797
    digits were tagged n<1K)."""
    import csv

    from hub.catalog import samples

    for sample in samples.SAMPLES:
        if sample.type != "dataset":
            continue
        files = sample.build()
        card = files["README.md"].decode()
        table = list(csv.reader(next(v for k, v in files.items() if k.endswith(".csv")).decode().splitlines()))
        rows, columns = len(table) - 1, len(table[0])
        stated = re.search(r"^(\d+) rows, (\d+) columns", card, re.M)
        assert stated and (int(stated[1]), int(stated[2])) == (rows, columns), (sample.repo_id, stated, rows, columns)
        category = yaml.safe_load(card.split("---")[1])["size_categories"][0]
        assert category == ("n<1K" if rows < 1000 else "1K<n<10K"), (sample.repo_id, category, rows)


def _entry(repo_id: str, title: str, **kw) -> dict:
    return {"repo_id": repo_id, "title": title, "summary": f"About {title}.", "license": "mit",
            "tasks": ["text-generation"], "modality": ["text"], "languages": ["zh", "en"], "size_bytes": 123_000_000,
            "file_count": 12, "homepage": "", "paper": "", **kw}


def test_an_embedded_hub_with_data_upgrades_through_every_migration(tmp_path) -> None:
    """An existing SQLite hub (search index and its triggers in place, a catalogued repo) takes the
    migrations that came after catalog 0007. One that rebuilt catalog_catalogentry failed there
    ("error in trigger catalog_repo_search_repo_ins: no such table: main.catalog_catalogentry"), so
    `scripts/run.sh` could not start on an older data directory; the search still finds the repo after."""
    from tests.support.servers import PYTHON, ROOT, base_env

    env = base_env() | {"HUB_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "hub.settings"}
    env = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "HUB_STORAGE_URL")}

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=300)

    for step in (("migrate",), ("migrate", "catalog", "0007")):  # (every other app as it is today)
        old = manage(*step)
        assert old.returncode == 0, old.stderr[-3000:]
    made = manage("shell", "-c", (
        "from django.db import connection; from hub.accounts.models import Namespace; "
        "from hub.repos.models import Repo; "
        "ns = Namespace.objects.create(name='upgrade-org', kind='org'); "
        "r = Repo.objects.create(namespace=ns, name='kept', type='dataset'); "
        # (the entry as catalog 0007 had it: today's model has columns that schema lacks)
        "connection.cursor().execute(\"INSERT INTO catalog_catalogentry (repo_id, upstream_id, title, summary, "
        "license, tasks, modality, languages, homepage, paper, base_model, parameters, source, search_text, "
        "updated) VALUES (%s, '', 'Kept corpus', '', '', '[]', '[]', '[]', '', '', '', '', 'seed', "
        "'upgrade-org/kept Kept corpus zebra', '2026-01-01')\", [r.pk])"))
    assert made.returncode == 0, made.stderr[-3000:]
    new = manage("migrate")
    assert new.returncode == 0, new.stderr[-3000:]
    found = manage("shell", "-c", (
        "from hub.catalog import services; from hub.repos.models import Repo; "
        "q = services.Query.from_params(Repo.DATASET, {'q': 'zebra'}); "
        "print([c.repo_id for c in services.search(None, q).object_list])"))
    assert found.returncode == 0 and "['upgrade-org/kept']" in found.stdout, found.stdout + found.stderr[-3000:]


def test_seed_catalog_is_idempotent(hub, unique, tmp_path) -> None:
    org = f"seedorg-{unique}"
    doc = {"datasets": [_entry(f"{org}/corpus-{i}", f"Corpus {i}") for i in range(3)],
           "models": [_entry(f"{org}/model-{i}", f"Model {i}", base_model="", parameters="7B") for i in range(2)]}
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))

    first = hub.manage("seed_catalog", "--file", str(path), "--no-samples").stdout
    assert "5 entries created, 0 updated, 0 unchanged; 5 repos and 1 organisations created" in first
    second = hub.manage("seed_catalog", "--file", str(path), "--no-samples").stdout
    assert "0 entries created, 0 updated, 5 unchanged; 0 repos and 0 organisations created" in second

    doc["datasets"][0]["title"] = "Corpus zero, renamed"
    doc["datasets"][0]["languages"] = ["ja"]
    doc["models"].append(_entry(f"{org}/model-new", "Model new"))
    path.write_text(yaml.safe_dump(doc))
    third = hub.manage("seed_catalog", "--file", str(path), "--no-samples").stdout
    assert "1 entries created, 1 updated, 4 unchanged; 1 repos and 0 organisations created" in third

    datasets = requests.get(f"{hub.url}/api/datasets", params={"author": org}, timeout=30).json()
    models = requests.get(f"{hub.url}/api/models", params={"author": org}, timeout=30).json()
    assert sorted(d["id"] for d in datasets) == [f"{org}/corpus-{i}" for i in range(3)]
    assert sorted(m["id"] for m in models) == [f"{org}/model-0", f"{org}/model-1", f"{org}/model-new"]
    page = requests.get(f"{hub.url}/datasets/{org}/corpus-0", timeout=30).text
    assert "Corpus zero, renamed" in page and "Japanese" in page and "Chinese" not in page
    # The filters follow the update: the renamed corpus is Japanese now, the others still Chinese.
    listing = requests.get(f"{hub.url}/datasets", params={"q": org, "language": "zh"}, timeout=30).text
    assert f"{org}/corpus-1" in listing and f"{org}/corpus-0" not in listing


def test_a_search_finds_ids_and_titles_by_their_words(hub, unique, tmp_path) -> None:
    # PostgreSQL's parser reads "org-12345" as 'org' and the number '-12345', and "x-1e5" as a float:
    # the search text also holds the words a query is split into, so these still match.
    org = f"find-{int(unique, 16)}"
    doc = {"datasets": [], "models": [
        _entry(f"{org}/llama-2-7b", "Llama-2 7B"), _entry(f"{org}/tiny-1e5", "Tiny 1e5"),
        _entry(f"{org}/snake_case_model", "Snake"), _entry(f"{org}/other", "Other")]}
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))
    hub.manage("seed_catalog", "--file", str(path), "--no-samples")

    def found(q: str) -> list[str]:
        page = requests.get(f"{hub.url}/models", params={"q": q, "sort": "name"}, timeout=30).text
        return [m for m in ("llama-2-7b", "tiny-1e5", "snake_case_model", "other") if f"{org}/{m}" in page]

    assert found(org) == ["llama-2-7b", "tiny-1e5", "snake_case_model", "other"]
    assert found(f"{org} llama 2") == found(f"{org} llama-2") == found(f"{org}/llama-2-7b") == ["llama-2-7b"]
    assert found(f"{org} 1e5") == found(f"{org}/tiny-1e5") == ["tiny-1e5"]
    assert found(f"{org} snake case") == found(f"{org}/snake_case_model") == ["snake_case_model"]
    assert found(f"{org} no-such-words") == []


def test_search_and_sorts_follow_repos_as_they_change(hub, unique, tmp_path) -> None:
    """The lists sort and search by keys kept beside the repos (a name key, the size shown, and a
    search table kept by triggers: SQLite's trigram index, PostgreSQL's tsvector per repo): created,
    moved, deleted, committed to and re-catalogued repos show up where they now belong, at once."""
    org, user = f"keys-{unique}", f"keyer{unique}"
    sizes = {"big": 9_000_000_000, "mid": 5_000_000_000, "small": 2_000_000_000}
    doc = {"datasets": [], "models": [_entry(f"{org}/{n}", f"Wombat {n}", size_bytes=s) for n, s in sizes.items()]}
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))
    hub.manage("seed_catalog", "--file", str(path), "--no-samples")
    api = hub.api(hub.token(user))
    hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; from hub.accounts import services as a; "
        "from hub.accounts.models import Namespace; "
        f"a.do_add_member(Namespace.objects.get(name='{org}'), get_user_model().objects.get(username='{user}'))"))
    calls = iter(range(10**6))

    def found(q: str, sort: str = "name") -> list[str]:
        # A fresh URL each time (an unknown parameter is ignored): anonymous pages are cached 15 s.
        page = requests.get(f"{hub.url}/models", params={"q": q, "sort": sort, "_": next(calls)}, timeout=30)
        assert page.status_code == 200
        return re.findall(rf'href="/((?:{org}|{user})/[\w.-]+)"', page.text)

    # Sorted by size, largest first: the catalog's upstream estimates while nothing is mirrored.
    assert found(org, "size") == [f"{org}/big", f"{org}/mid", f"{org}/small"]
    # Mirrored, a repo is listed (and sorted) by the bytes it holds: 17 bytes sort below 2 GB.
    api.upload_file(path_or_fileobj=b"seventeen bytes..", path_in_repo="weights.bin", repo_id=f"{org}/big")
    assert found(org, "size") == [f"{org}/mid", f"{org}/small", f"{org}/big"]
    # Re-catalogued with a new estimate: the unmirrored one moves.
    doc["models"][2]["size_bytes"] = 7_000_000_000
    path.write_text(yaml.safe_dump(doc))
    hub.manage("seed_catalog", "--file", str(path), "--no-samples")
    assert found(org, "size") == [f"{org}/small", f"{org}/mid", f"{org}/big"]
    # ... and its new words are found, its old title's are not.
    doc["models"][2] |= {"title": "Renamed quokka", "summary": "About a quokka."}
    path.write_text(yaml.safe_dump(doc))
    hub.manage("seed_catalog", "--file", str(path), "--no-samples")
    assert found(f"{org} quokka") == [f"{org}/small"]
    assert found(f"{org} wombat") == [f"{org}/big", f"{org}/mid"]

    # Repos without catalog metadata are found by their id, in name order, whatever the case.
    for name in ("Zeta-repo", "alpha-repo", "Mu-repo"):
        api.create_repo(f"{user}/{name}")
    assert found(user) == [f"{user}/alpha-repo", f"{user}/Mu-repo", f"{user}/Zeta-repo"]
    assert found(f"{user} mu") == [f"{user}/Mu-repo"]  # a two-letter word: a substring too
    api.move_repo(f"{user}/Mu-repo", f"{user}/omega-repo")
    assert found(f"{user} omega") == [f"{user}/omega-repo"]
    assert found(f"{user} mu") == []
    assert found(user) == [f"{user}/alpha-repo", f"{user}/omega-repo", f"{user}/Zeta-repo"]
    api.delete_repo(f"{user}/alpha-repo")
    assert found(user) == [f"{user}/omega-repo", f"{user}/Zeta-repo"]


def test_filter_counts_follow_the_catalog_at_once(hub, unique, tmp_path) -> None:
    """The counts next to a filter's values are kept per process, but never past a change: a re-seed,
    a repo made private and a repo deleted each show in the very next page (they lagged up to a
    minute behind, e.g. "Chinese (2)" beside a list of 13)."""
    org, user, lic = f"facets-{unique}", f"facetor{unique}", f"lic-{unique}"
    doc = {"datasets": [_entry(f"{org}/d{i}", f"Facet {i}", license=lic) for i in range(2)], "models": []}
    path = tmp_path / "catalog.yaml"

    def seed() -> None:
        path.write_text(yaml.safe_dump(doc))
        hub.manage("seed_catalog", "--file", str(path), "--no-samples")

    calls = iter(range(10**6))

    def count() -> int | None:
        # A fresh URL each time (an unknown parameter is ignored): anonymous pages are cached 15 s.
        page = requests.get(f"{hub.url}/datasets", params={"_": next(calls)}, timeout=30).text
        found = re.search(rf'<option value="{lic}">{lic} \((\d+)\)</option>', page)
        return int(found.group(1)) if found else None

    seed()
    assert count() == 2
    doc["datasets"].append(_entry(f"{org}/d2", "Facet 2", license=lic))
    seed()
    assert count() == 3
    api = hub.api(hub.token(user))
    hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; from hub.accounts import services as a; "
        "from hub.accounts.models import Namespace; "
        f"a.do_add_member(Namespace.objects.get(name='{org}'), get_user_model().objects.get(username='{user}'))"))
    api.update_repo_settings(f"{org}/d0", private=True, repo_type="dataset")
    assert count() == 2
    api.delete_repo(f"{org}/d1", repo_type="dataset")
    assert count() == 1
    api.update_repo_settings(f"{org}/d0", private=False, repo_type="dataset")
    assert count() == 2


def test_a_repo_made_private_or_deleted_leaves_the_anonymous_pages_at_once(hub, unique) -> None:
    """Anonymous list and search pages are kept for some seconds, but a repo made private (or
    deleted) is gone from them at the next request, not when the kept page expires."""
    user = f"hider{unique}"
    api = hub.api(hub.token(user))
    for name in ("shown", "hidden"):
        api.create_repo(f"{user}/{name}")

    def listed() -> list[str]:  # the same URL each time: the kept page when nothing changed
        page = requests.get(f"{hub.url}/models", params={"q": user}, timeout=30)
        assert page.status_code == 200
        return sorted(re.findall(rf'href="/({user}/[\w.-]+)"', page.text))

    assert listed() == [f"{user}/hidden", f"{user}/shown"]
    assert listed() == [f"{user}/hidden", f"{user}/shown"]
    api.update_repo_settings(f"{user}/hidden", private=True)
    assert listed() == [f"{user}/shown"]
    api.delete_repo(f"{user}/shown")
    assert listed() == []


def test_a_visitors_list_total_follows_repos_coming_and_going_at_once(hub, unique) -> None:
    """A visitor's unfiltered list keeps its total under the catalog's version (no COUNT per page),
    and its page under that version too: a repo created, made public or private, or deleted changes
    the total shown at the very next request, whether the page is kept (same URL) or not."""
    user = f"counter{unique}"
    api = hub.api(hub.token(user))
    calls = iter(range(10**6))

    def totals() -> tuple[int, int]:  # (the same URL each time, a fresh one)
        out = []
        for params in ({}, {"_": next(calls)}):
            page = requests.get(f"{hub.url}/models", params=params, timeout=30)
            assert page.status_code == 200
            out.append(int(re.search(r'id="total">([\d,]+)<', page.text).group(1).replace(",", "")))
        return out[0], out[1]

    before, _ = totals()
    assert totals() == (before, before)
    api.create_repo(f"{user}/one")
    assert totals() == (before + 1, before + 1)
    api.create_repo(f"{user}/two", private=True)
    assert totals() == (before + 1, before + 1)
    api.update_repo_settings(f"{user}/two", private=False)
    assert totals() == (before + 2, before + 2)
    api.delete_repo(f"{user}/one")
    assert totals() == (before + 1, before + 1)
    api.update_repo_settings(f"{user}/two", private=True)
    assert totals() == (before, before)


def test_the_samples_load_with_transformers_against_the_hub(hub, tmp_path) -> None:
    """A fresh hub has real content: the tiny models load through the stock transformers client and
    the iris data reads through HF_ENDPOINT, with only the hub's URL."""
    hub.manage("seed_catalog", "--file", str(_empty_catalog(tmp_path)))
    script = textwrap.dedent("""
        import json, torch
        from huggingface_hub import hf_hub_download
        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer
        tok = AutoTokenizer.from_pretrained("hub-samples/tiny-gpt2")
        model, info = AutoModelForCausalLM.from_pretrained("hub-samples/tiny-gpt2", output_loading_info=True)
        out = model.generate(**tok("Hello", return_tensors="pt"), max_new_tokens=4, do_sample=False)
        bert_tok = AutoTokenizer.from_pretrained("hub-samples/tiny-bert")
        bert, bert_info = AutoModel.from_pretrained("hub-samples/tiny-bert", output_loading_info=True)
        hidden = bert(**bert_tok("hello world", return_tensors="pt")).last_hidden_state
        csv = open(hf_hub_download("scikit-learn/iris", "iris.csv", repo_type="dataset")).read().splitlines()
        print(json.dumps({"text": tok.decode(out[0]), "missing": sorted(info["missing_keys"]) + sorted(bert_info["missing_keys"]),
                          "unexpected": sorted(info["unexpected_keys"]) + sorted(bert_info["unexpected_keys"]),
                          "hidden": list(hidden.shape), "rows": len(csv) - 1, "header": csv[0]}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_"))}
    env |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["text"].startswith("Hello")
    assert result["missing"] == [] and result["unexpected"] == []
    assert result["hidden"] == [1, 12, 32]  # [CLS] h ##e ##l ##l ##o w ##o ##r ##l ##d [SEP]
    assert result["rows"] == 150 and result["header"].startswith("sepal length (cm),")


def test_an_entry_not_mirrored_yet_says_so_wherever_its_files_are_asked_for(hub, unique, tmp_path) -> None:
    """Pulling, downloading or mounting a catalog entry whose files are not on the hub yet found no
    files and said nothing (`hub pull` "pulled 1 files"); now the manifest, the download 404, `hub
    pull` (which fails) say what the web page says: not mirrored yet, its size, how to mirror it. A
    user's own empty repo is not an unmirrored entry: it pulls (nothing) without a word."""
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    from tests.support.hub_cli import client_env, failed, ok, run

    org = f"upstream-{unique}"
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"datasets": [], "models": [
        _entry(f"{org}/big-model", "Big model", base_model="", parameters="6B", size_bytes=12_500_000_000,
               file_count=15)]}))
    hub.manage("seed_catalog", "--file", str(path), "--no-samples")
    token = hub.cached_token(f"carol-{unique}")

    first = requests.get(f"{hub.url}/api/v1/repos/model/{org}/big-model/manifest", timeout=30).json()
    notice = first["notice"]
    assert "not on this hub yet" in notice and "12.5 GB" in notice and "15 files" in notice, notice
    assert f"manage.py mirror {org}/big-model" in notice, notice

    with pytest.raises(EntryNotFoundError) as err:
        hf_hub_download(f"{org}/big-model", "config.json", endpoint=hub.url, cache_dir=tmp_path / "hf", token=False)
    assert "not on this hub yet" in str(err.value), err.value
    # snapshot_download (and `hf download`) fail with the reason instead of "downloading" an empty
    # folder; repo info, which transformers and datasets read first, carries it as a warning the
    # client logs before the library's own error.
    with pytest.raises(LocalEntryNotFoundError, match=f"not on this hub yet.*manage.py mirror {org}/big-model"):
        snapshot_download(f"{org}/big-model", endpoint=hub.url, cache_dir=tmp_path / "hf", token=False)
    info = requests.get(f"{hub.url}/api/models/{org}/big-model", timeout=30)
    assert info.status_code == 200 and "not on this hub yet" in info.headers["X-HF-Warning"]

    env = client_env(hub, token, tmp_path)
    line = failed(run(env, "pull", f"{org}/big-model", "--local-dir", str(tmp_path / "out")),
                  "nothing to pull", "not on this hub yet", "mirror")
    assert "12.5 GB" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

    own = f"carol-{unique}/scratch"
    hub.api(token).create_repo(own)
    assert requests.get(f"{hub.url}/api/v1/repos/model/{own}/manifest", timeout=30,
                        headers={"Authorization": f"Bearer {token}"}).json()["notice"] is None
    proc = ok(run(env, "pull", own, "--local-dir", str(tmp_path / "own")))
    assert "not on this hub" not in proc.stderr


def test_a_users_own_empty_repo_is_not_shown_as_an_unmirrored_entry(hub, unique, tmp_path) -> None:
    """A repo someone just created has no files yet; it is not a catalog entry waiting to be mirrored
    (its page said "not mirrored", "Use it once mirrored", and named hub://datasets/NS/NAME/ as a file
    to open). Its fsspec snippet lists it instead, and runs."""
    one_backend(hub)
    import html

    from tests.support.hub_cli import client_env

    owner = f"dan-{unique}"
    token = hub.cached_token(owner)
    hub.api(token).create_repo(f"{owner}/fresh", repo_type="dataset")
    page = requests.get(f"{hub.url}/datasets/{owner}/fresh", timeout=30).text
    assert "no files yet" in page and "not mirrored" not in page and "once mirrored" not in page
    listing = requests.get(f"{hub.url}/datasets", params={"q": owner}, timeout=30).text
    assert f"{owner}/fresh" in listing and "no files yet" in listing and "not mirrored</span>" not in listing
    snippet = html.unescape(re.search(r"fsspec / pandas URL</div><pre><code>(.*?)</code>", page, re.S)[1])
    assert f'fs.ls("datasets/{owner}/fresh")' in snippet, snippet
    proc = subprocess.run([sys.executable, "-c", snippet], env=client_env(hub, token, tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and ".gitattributes" in proc.stdout, proc.stderr[-2000:]


def test_a_cards_relative_images_and_links_point_at_the_repos_files(hub, unique) -> None:
    """A README's `![chart](img/chart.png)` and `[guide](docs/guide.md)` are relative to the repo,
    as on the Hugging Face Hub; the page put them relative to its own URL (a 404). The image now
    loads its bytes and the link opens the file's page, at the commit shown; anchors, absolute URLs
    and javascript: are left alone or removed as before."""
    one_backend(hub)
    owner = f"erin-{unique}"
    token = hub.cached_token(owner)
    api = hub.api(token)
    repo = f"{owner}/pictures"
    api.create_repo(repo, repo_type="dataset")
    png = os.urandom(3000)
    readme = ("# Pictures\n\n![chart](img/chart.png) [guide](./docs/guide.md#setup) [usage](#usage) "
              "[site](https://example.org/x) <a href=\"javascript:alert(1)\">bad</a>\n")
    api.upload_file(path_or_fileobj=png, path_in_repo="img/chart.png", repo_id=repo, repo_type="dataset")
    api.upload_file(path_or_fileobj=b"# Guide", path_in_repo="docs/guide.md", repo_id=repo, repo_type="dataset")
    head = api.upload_file(path_or_fileobj=readme.encode(), path_in_repo="README.md", repo_id=repo,
                           repo_type="dataset").oid
    page = requests.get(f"{hub.url}/datasets/{repo}", timeout=30).text
    src = re.search(r'<img alt="chart" src="([^"]+)"', page)[1]
    assert src == f"/datasets/{repo}/resolve/{head}/img/chart.png", src
    assert requests.get(hub.url + src, timeout=30).content == png
    link = re.search(r'<a href="([^"]+)"[^>]*>guide</a>', page)[1]
    assert link == f"/datasets/{repo}/blob/{head}/docs/guide.md#setup", link
    assert requests.get(hub.url + link.split("#")[0], timeout=30).status_code == 200
    assert 'href="#usage"' in page and 'href="https://example.org/x"' in page and "javascript:" not in page


def test_a_pushed_repos_card_metadata_reaches_the_filters_and_search(hub, unique) -> None:
    """A repo pushed with a README declaring license, task_categories, language and pretty_name is
    found by those filters and by its pretty name, as catalog entries are (its page showed them, the
    filters did not); a card that stops declaring them takes it out again."""
    owner = f"fay-{unique}"
    token = hub.cached_token(owner)
    api = hub.api(token)
    repo = f"{owner}/reviews"
    api.create_repo(repo, repo_type="dataset")
    card = (f"---\npretty_name: Shop reviews {unique}\nlicense: MIT\ntask_categories:\n- text-classification\n"
            "language:\n- en\n- zh\ntags:\n- modality:text\n---\n# Reviews\n")
    api.upload_file(path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id=repo, repo_type="dataset")
    api.upload_file(path_or_fileobj=b"text,label\ngood,1\n", path_in_repo="train.csv", repo_id=repo,
                    repo_type="dataset")

    def found(**params) -> bool:
        page = requests.get(f"{hub.url}/datasets", params=params, timeout=30)
        assert page.status_code == 200
        return f"/datasets/{repo}\"" in page.text

    for params in ({"license": "mit"}, {"task": "text-classification"}, {"language": "zh"}, {"modality": "text"},
                   {"q": f"shop reviews {unique}"}):
        assert found(q=owner, **params) if "q" not in params else found(**params), params
    options = requests.get(f"{hub.url}/datasets", params={"q": owner}, timeout=30).text
    assert 'value="text-classification"' in options
    assert not found(q=owner, license="apache-2.0")

    api.upload_file(path_or_fileobj=b"# Reviews, no metadata\n", path_in_repo="README.md", repo_id=repo,
                    repo_type="dataset")
    assert not found(q=owner, license="mit") and not found(q=f"shop reviews {unique}")
    assert found(q=owner)  # still listed, by its id


def _empty_catalog(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("datasets: []\nmodels: []\n")
    return path


def test_repos_without_catalog_metadata_are_listed_and_found_by_their_id(hub, unique) -> None:
    # bob's repos have no catalog entry: a search matches their namespace and name; the private one
    # is never listed for a visitor, neither in a search nor in the newest-first list.
    bob = f"bob-{unique}"
    api = hub.api(hub.cached_token(bob))
    api.create_repo(f"{bob}/plain-weights")
    api.create_repo(f"{bob}/secret-weights", private=True)

    def listed(**params) -> str:
        return requests.get(f"{hub.url}/models", params=params, timeout=30).text

    assert f"{bob}/plain-weights" in listed(q=bob)
    assert f"{bob}/plain-weights" in listed(q=f"{bob} plain")
    assert f"{bob}/plain-weights" not in listed(q=f"{bob} secret")
    assert f"{bob}/plain-weights" in listed(sort="updated")
    for page in (listed(q=bob), listed(q=f"{bob} secret"), listed(sort="updated")):
        assert "secret-weights" not in page
