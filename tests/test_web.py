"""The web catalog in a real headless Chromium (Debian's, driven by Playwright) against live hubs
seeded with the real catalog. Screenshots of the main pages go to tests/artifacts/screenshots/.

Personas: alice-* signs in and uses her account; bob-* owns a private repo; an anonymous visitor
browses."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
import requests

from tests.conftest import one_backend
from tests.support.web import CSP_WATCH, PHONE, SHOTS

CHROMIUM = os.environ.get("HUB_TEST_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct horse battery"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.set_default_timeout(20_000)
    pg = context.new_page()
    yield pg
    context.close()


def shot(page, hub, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{hub.name}-{name}.png"), full_page=True)


def sign_in(page, hub, username: str) -> None:
    hub.manage("hub_password", username, "--password", PASSWORD)
    page.goto(f"{hub.url}/accounts/login")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r".*/settings$"))


def total(page) -> int:
    return int(page.inner_text("#total").replace(",", ""))


def result_ids(page) -> list[str]:
    return page.locator("#results .card .title a").all_inner_texts()


# --- anonymous browsing ---------------------------------------------------------------------------

def test_it_shows_counts_and_highlights_on_the_home_page(site, page) -> None:
    page.goto(site.url)
    stats = page.locator(".stat b").all_inner_texts()
    assert int(stats[0].replace(",", "")) >= 300 and int(stats[1].replace(",", "")) >= 50
    highlights = page.locator(".card .title a").all_inner_texts()
    assert "ILSVRC/imagenet-1k" in highlights and "THUDM/chatglm3-6b" in highlights
    shot(page, site, "home")
    page.fill(".hero input[type=search]", "chatglm3")
    page.click("text=Search models")
    page.wait_for_url(re.compile(r".*/models\?q=chatglm3"))
    assert "THUDM/chatglm3-6b" in result_ids(page)


def test_it_searches_filters_sorts_and_pages_the_datasets(site, page) -> None:
    page.goto(f"{site.url}/datasets")
    everything = total(page)
    assert everything >= 300
    first_page = result_ids(page)
    assert len(first_page) == 30
    page.click(".pager a[rel=next]")
    page.wait_for_url(re.compile(r".*p=2"))
    assert not set(result_ids(page)) & set(first_page)

    page.goto(f"{site.url}/datasets")
    page.fill(".searchbar input[type=search]", "imagenet")
    page.click(".searchbar button")
    page.wait_for_url(re.compile(r".*q=imagenet"))
    assert "ILSVRC/imagenet-1k" in result_ids(page)
    assert total(page) < 20

    # Chinese dialogue corpora: search, then a language filter (applied on change by the page's script).
    page.goto(f"{site.url}/datasets?q=dialogue")
    dialogue = total(page)
    page.select_option("#f-language", "zh")
    page.wait_for_url(re.compile(r".*language=zh"))
    assert 0 < total(page) < dialogue
    chips = page.locator("#results .card").count()
    assert chips == total(page)
    assert page.locator(".active .chip.lang").inner_text().startswith("Chinese")
    shot(page, site, "datasets-filtered")

    # Mirrored only: the samples with real files, and nothing else of the seed.
    # (every page of it: other tests' datasets sort before the samples by name)
    ids = _all_ids(page, site, "/datasets?mirrored=yes&sort=name")
    assert {"scikit-learn/iris", "hub-samples/wine", "hub-samples/digits"} <= set(ids)
    assert "ILSVRC/imagenet-1k" not in ids
    assert ids == sorted(ids, key=lambda i: i.replace("/", " ").lower())  # (as sort_name orders them)

    # Size bucket and task filter on the models, sorted by size.
    page.goto(f"{site.url}/models?task=text-generation&language=zh")
    chinese_chat = _all_ids(page, site, "/models?task=text-generation&language=zh")
    assert {"THUDM/chatglm3-6b", "baichuan-inc/Baichuan2-7B-Chat", "hfl/chinese-alpaca-2-7b"} <= set(chinese_chat)
    page.goto(f"{site.url}/datasets?size=gt100g")
    page.select_option("#f-sort", "size")
    page.wait_for_url(re.compile(r".*sort=size"))
    big = result_ids(page)
    assert "ILSVRC/imagenet-1k" in big  # about 167 GB upstream
    sizes = [float(m) for m in re.findall(r"([0-9.]+) GB", " ".join(page.locator("#results .meta").all_inner_texts()))]
    assert len(sizes) == len(big) and sizes == sorted(sizes, reverse=True) and min(sizes) >= 100
    assert page.locator("#f-sort").input_value() == "size"
    small = _all_ids(page, site, "/datasets?size=lt100m&mirrored=yes")  # (other tests' datasets fill page 1)
    assert "scikit-learn/iris" in small and not set(big) & set(small)


def _all_ids(page, hub, path: str) -> list[str]:
    ids: list[str] = []
    page.goto(hub.url + path)
    while True:
        ids += result_ids(page)
        nxt = page.locator(".pager a[rel=next]")
        if not nxt.count():
            return ids
        nxt.click()
        page.wait_for_load_state()


def test_it_says_plainly_when_an_entry_is_not_mirrored(site, page) -> None:
    page.goto(f"{site.url}/datasets/ILSVRC/imagenet-1k")
    notice = page.locator("#not-mirrored")
    text = notice.inner_text()
    assert "not on this hub yet" in text and "167 GB" in text
    assert "python manage.py mirror ILSVRC/imagenet-1k --type dataset" in text
    assert page.locator(".badge.pending").first.is_visible()
    use = page.locator("#use-it").inner_text()
    assert "hub pull datasets/ILSVRC/imagenet-1k" in use and "/mnt/hub/datasets/ILSVRC/imagenet-1k" in use
    assert f"HF_ENDPOINT={site.url}" in use and 'load_dataset("ILSVRC/imagenet-1k")' in use
    shot(page, site, "repo-not-mirrored")


def test_it_renders_a_sample_card_and_its_snippets(site, page) -> None:
    page.goto(f"{site.url}/datasets/scikit-learn/iris")
    assert page.locator("#not-mirrored").count() == 0
    card = page.locator("article.markdown").inner_text()
    assert "150 rows" in card and "configs:" not in card  # the YAML front matter is not shown
    use = page.locator("#use-it").inner_text()
    assert "hub://datasets/scikit-learn/iris/data/train-00000-of-00001.parquet" in use
    shot(page, site, "repo-card")
    page.goto(f"{site.url}/hub-samples/tiny-gpt2")
    use = page.locator("#use-it").inner_text()
    assert 'AutoModel.from_pretrained("hub-samples/tiny-gpt2")' in use and "hub pull hub-samples/tiny-gpt2" in use


def test_it_browses_files_at_a_tag_and_downloads_the_bytes(site, page, unique) -> None:
    owner = f"carol-{unique}"
    api = site.api(site.token(owner))
    repo_id = f"{owner}/tagged-{unique}"
    api.create_repo(repo_id, repo_type="dataset")
    v1 = os.urandom(50_000)
    api.upload_file(path_or_fileobj=v1, path_in_repo="data/part-0.bin", repo_id=repo_id, repo_type="dataset",
                    commit_message="first part")
    api.create_tag(repo_id, tag="v1", repo_type="dataset")
    api.upload_file(path_or_fileobj=b"second", path_in_repo="data/part-1.bin", repo_id=repo_id,
                    repo_type="dataset", commit_message="second part")
    api.upload_file(path_or_fileobj=b"changed", path_in_repo="data/part-0.bin", repo_id=repo_id,
                    repo_type="dataset", commit_message="replace the first part")

    page.goto(f"{site.url}/datasets/{repo_id}")
    page.click(".tabs >> text=Files")
    page.select_option("#rev", "v1")
    page.click("form.inline button:has-text('Go')")
    page.wait_for_url(re.compile(r".*/tree/v1$"))
    page.click("#files a:has-text('data/')")
    page.wait_for_url(re.compile(r".*/tree/v1/data$"))
    names = page.locator("#files td.name a").all_inner_texts()
    assert names == ["part-0.bin"]  # part-1.bin came after the tag
    assert "50 kB" in page.locator("#files").inner_text()
    shot(page, site, "files-at-tag")
    with page.expect_download() as download:
        page.click("#files a.download")
    assert Path(download.value.path()).read_bytes() == v1

    page.goto(f"{site.url}/datasets/{repo_id}/tree/main/data")
    assert page.locator("#files td.name a").all_inner_texts() == ["part-0.bin", "part-1.bin"]
    page.click("#files a:has-text('part-1.bin')")
    assert page.locator(".file-view").inner_text().count("sha256") == 1
    with page.expect_download() as download:
        page.click(".file-view a.download")
    assert Path(download.value.path()).read_bytes() == b"second"

    page.click(".tabs >> text=History")
    titles = page.locator("#commits a.title").all_inner_texts()
    assert titles[:3] == ["replace the first part", "second part", "first part"]
    page.click(".tabs >> text=Branches")
    assert page.locator("#tags").inner_text().startswith("v1")
    assert "main" in page.locator("#branches").inner_text()


def test_a_sample_file_downloads_byte_for_byte(site, page) -> None:
    page.goto(f"{site.url}/datasets/scikit-learn/iris/tree/v1.0")
    with page.expect_download() as download:
        page.locator("#files tr", has_text="iris.csv").locator("a.download").click()
    got = Path(download.value.path()).read_bytes()
    want = requests.get(f"{site.url}/datasets/scikit-learn/iris/resolve/v1.0/iris.csv", timeout=30).content
    assert got == want and got.startswith(b"sepal length (cm),")
    shot(page, site, "files")


def test_missing_and_private_repos_get_the_same_404_page(site, page, unique) -> None:
    bob = f"bob-{unique}"
    api = site.api(site.token(bob))
    api.create_repo(f"{bob}/secret", private=True)
    api.upload_file(path_or_fileobj=b"# hush\n", path_in_repo="README.md", repo_id=f"{bob}/secret")

    private = page.goto(f"{site.url}/{bob}/secret")
    private_text = page.locator(".error-page h1").inner_text()
    missing = page.goto(f"{site.url}/{bob}/no-such-repo")
    assert private.status == missing.status == 404
    assert private_text == page.locator(".error-page h1").inner_text() == "Not found"
    assert page.goto(f"{site.url}/{bob}/secret/tree/main").status == 404
    assert page.goto(f"{site.url}/no/such/page/at/all").status == 404
    assert page.locator(".error-page h1").inner_text() == "Not found"
    shot(page, site, "404")

    page.goto(f"{site.url}/models?q={bob}")
    assert f"{bob}/secret" not in result_ids(page)

    sign_in(page, site, bob)
    assert page.goto(f"{site.url}/{bob}/secret").status == 200
    assert page.locator("article.markdown h1").inner_text() == "hush"
    # Signed in, the lists include one's own private repos, whatever the sort.
    for sort in ("downloads", "name", "size", "updated"):
        page.goto(f"{site.url}/models?q={bob}&sort={sort}")
        assert result_ids(page) == [f"{bob}/secret"]
        assert page.locator("#results .badge.private").count() == 1
    page.goto(f"{site.url}/models?sort=name&task=text-generation")
    assert len(result_ids(page)) == 30


def test_a_card_is_sanitized(site, page, unique) -> None:
    owner = f"dave-{unique}"
    api = site.api(site.token(owner))
    api.create_repo(f"{owner}/card")
    card = ("---\nlicense: mit\ntags: [demo]\n---\n# Title\n\n<script>window.pwned = 1</script>\n"
            "<img src=x onerror=\"window.pwned = 2\">\n\n[link](javascript:alert(1)) and **bold**\n")
    api.upload_file(path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id=f"{owner}/card")
    page.goto(f"{site.url}/{owner}/card")
    body = page.locator("article.markdown")
    assert body.locator("strong").inner_text() == "bold"
    assert body.locator("script").count() == 0 and "onerror" not in body.inner_html()
    assert "javascript:" not in body.inner_html()
    assert page.evaluate("window.pwned") is None
    assert "license: mit" not in body.inner_text()
    side = page.locator(".side").inner_text()
    assert "mit" in side and "demo" in side


# --- an account -----------------------------------------------------------------------------------

def test_it_signs_in_creates_and_revokes_a_token(site, page, unique) -> None:
    alice = f"alice-{unique}"
    sign_in(page, site, alice)
    assert page.locator("header .who").inner_text().startswith(alice)
    page.goto(f"{site.url}/settings/tokens")
    page.fill("#token-name", "laptop")
    page.select_option("#token-role", "write")
    page.click("#create-token button")
    token = page.inner_text("#token-value").strip()
    assert token.startswith("hub_")
    shot(page, site, "tokens")
    who = requests.get(f"{site.url}/api/whoami-v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert who.status_code == 200 and who.json()["name"] == alice

    page.reload()
    assert page.locator("#new-token").count() == 0  # shown once
    row = page.locator("#tokens tr[data-name=laptop]")
    assert "write" in row.inner_text() and "never" not in row.inner_text()  # last used just now
    page.once("dialog", lambda d: d.accept())
    row.locator("button:has-text('Revoke')").click()
    assert "no longer works" in page.locator(".messages").inner_text()
    assert "revoked" in page.locator("#tokens tr[data-name=laptop]").inner_text()
    who = requests.get(f"{site.url}/api/whoami-v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert who.status_code == 401

    page.click("header .who button:has-text('Sign out')")
    page.goto(f"{site.url}/settings/tokens")
    assert "/accounts/login" in page.url


def test_the_quota_bar_moves_with_volume_uploads(site, page, unique, tmp_path) -> None:
    alice = f"alice-{unique}"
    site.manage("hub_token", alice, "--quota", "1MB")
    sign_in(page, site, alice)
    page.goto(f"{site.url}/settings/volume")
    bar = page.locator("#quota .bar")
    assert int(bar.get_attribute("aria-valuenow")) == 0

    data = os.urandom(300_000)
    src = tmp_path / "weights.bin"
    src.write_bytes(data)
    page.set_input_files("#file", str(src))
    page.click("#upload button")
    assert "Uploaded weights.bin" in page.locator(".messages").inner_text()
    assert int(bar.get_attribute("aria-valuenow")) == 300_000
    assert "width: 30.0%" in page.locator("#quota .used").get_attribute("style")
    page.fill("#dirname", "runs")
    page.click("#mkdir button")
    shot(page, site, "volume")

    with page.expect_download() as download:
        page.click("#volume a.download:has-text('weights.bin')")
    assert hashlib.sha256(Path(download.value.path()).read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()

    row = page.locator("#volume tr[data-path='weights.bin']")
    row.locator("input[name=dst]").fill("runs/ckpt.bin")
    row.locator("button:has-text('Rename')").click()
    assert "Renamed weights.bin to runs/ckpt.bin" in page.locator(".messages").inner_text()
    assert page.locator("#volume tr[data-path='runs/ckpt.bin']").count() == 1

    page.goto(f"{site.url}/settings")
    assert "your volume" in page.locator("#consumers").inner_text()
    assert "300 kB" in page.locator("#consumers").inner_text()
    shot(page, site, "account-quota")

    # Over quota: said on the volume page, beside its quota bar, and nothing written.
    big = tmp_path / "too-big.bin"
    big.write_bytes(os.urandom(800_000))
    page.goto(f"{site.url}/settings/volume")
    page.set_input_files("#file", str(big))
    page.click("#upload button")
    text = page.locator(".messages li.error").inner_text()
    assert text.startswith("quota exceeded") and "300 kB of 1 MB used" in text and "needs 800 kB" in text
    assert int(page.locator("#quota .bar").get_attribute("aria-valuenow")) == 300_000
    assert page.locator("#volume tr[data-path='too-big.bin']").count() == 0
    shot(page, site, "413")

    page.goto(f"{site.url}/settings/volume?path=runs")
    page.on("dialog", lambda d: d.accept())
    page.locator("#volume tr[data-path='runs/ckpt.bin'] button:has-text('Delete')").click()
    assert "Deleted runs/ckpt.bin; 300 kB freed" in page.locator(".messages").inner_text()
    assert int(page.locator("#quota .bar").get_attribute("aria-valuenow")) == 0


def test_the_account_page_lists_interrupted_uploads_and_aborts_them(site, page, unique) -> None:
    """What an interrupted upload holds shows under the quota bar, with an Abort for its owner that
    gives the bytes back at once."""
    bea = f"bea-{unique}"
    token = site.manage("hub_token", bea, "--quota", "1MB").stdout.strip().splitlines()[-1]
    started = requests.post(f"{site.url}/api/volume/uploads", headers={"Authorization": f"Bearer {token}"},
                            json={"path": "ckpt/step-1.pt", "size": 600_000, "checked": True}, timeout=30)
    assert started.status_code == 201, started.text
    sign_in(page, site, bea)
    page.goto(f"{site.url}/settings")
    row = page.locator(f"#reservations tr[data-upload='{started.json()['id']}']")
    assert re.fullmatch(r"volume: ckpt/step-1\.pt\s+600 kB\s+lapses in\s(1\sday|2[3-5]\shours)\s+Abort", row.inner_text().strip())
    assert "600 kB reserved by uploads in progress" in page.locator("#quota").inner_text()
    shot(page, site, "account-reservations")

    page.once("dialog", lambda d: d.accept())
    row.locator("button:has-text('Abort')").click()
    assert "Aborted the upload to volume: ckpt/step-1.pt; 600 kB given back." in page.locator(".messages").inner_text()
    assert page.locator("#reservations").count() == 0 and "reserved" not in page.locator("#quota").inner_text()
    quota = requests.get(f"{site.url}/api/quota", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert (quota["reserved"], quota["reservations"]) == (0, [])
    # Ended: the session can no more be resumed.
    assert requests.get(f"{site.url}/api/volume/uploads/{started.json()['id']}", timeout=30,
                        headers={"Authorization": f"Bearer {token}"}).status_code == 404


def test_it_manages_instances_and_their_mounts(site, page, unique) -> None:
    alice = f"alice-{unique}"
    sign_in(page, site, alice)
    page.goto(f"{site.url}/settings/instances")
    page.fill("#inst-name", "gpu-01")
    page.fill("#inst-repo", "scikit-learn/iris")
    page.click("#register button")
    assert "Registered gpu-01" in page.locator("#new-instance").inner_text()
    instance_token = page.locator("#new-instance .token").inner_text().strip()
    # The command shown is the one the agent takes (it read HUB_TOKEN, which `hub mount --auto` ignores).
    command = page.locator("#new-instance .mount-command").inner_text().strip()
    assert command == f"HUB_ENDPOINT={site.url} HUB_INSTANCE_TOKEN=<that token> hub mount --auto", command
    box = page.locator("section.instance[data-name='gpu-01']")
    assert "/mnt/hub/datasets/scikit-learn/iris" in box.inner_text()
    spec = requests.get(f"{site.url}/api/instances/spec", headers={"Authorization": f"Bearer {instance_token}"},
                        timeout=30)
    assert spec.status_code == 200
    assert [m["repo_id"] for m in spec.json()["mounts"] if m["kind"] != "volume"] == ["scikit-learn/iris"]

    box.locator("select[name=type]").select_option("model")
    box.locator("input[name=repo]").fill("hub-samples/tiny-gpt2")
    box.locator("button:has-text('Attach')").click()
    box = page.locator("section.instance[data-name='gpu-01']")
    assert "/mnt/hub/models/hub-samples/tiny-gpt2" in box.inner_text()
    shot(page, site, "instances")

    box.locator("tr", has_text="scikit-learn/iris").locator("button:has-text('Detach')").click()
    box = page.locator("section.instance[data-name='gpu-01']")
    assert "scikit-learn/iris" not in box.inner_text()

    page.once("dialog", lambda d: d.accept())
    box.locator("button:has-text('Revoke')").click()
    assert "revoked" in page.locator("section.instance[data-name='gpu-01'] .status").inner_text()
    spec = requests.get(f"{site.url}/api/instances/spec", headers={"Authorization": f"Bearer {instance_token}"},
                        timeout=30)
    assert spec.status_code == 401

    # A repo that does not exist is a message on the page, not a crash (test_instance_form_errors_...).
    page.fill("#inst-name", "gpu-02")
    page.fill("#inst-repo", "nobody/nothing")
    page.click("#register button")
    assert "nobody/nothing" in page.locator(".messages li.error").inner_text()


def test_forms_need_a_csrf_token(site, unique) -> None:
    alice = f"alice-{unique}"
    site.manage("hub_password", alice, "--password", PASSWORD)
    s = requests.Session()
    s.get(f"{site.url}/accounts/login", timeout=30)
    r = s.post(f"{site.url}/accounts/login", data={"username": alice, "password": PASSWORD}, timeout=30)
    assert r.status_code == 403  # no csrfmiddlewaretoken
    s.post(f"{site.url}/accounts/login", timeout=30,
           data={"username": alice, "password": PASSWORD, "csrfmiddlewaretoken": s.cookies["csrftoken"]},
           headers={"Referer": f"{site.url}/accounts/login"})
    assert s.get(f"{site.url}/settings", timeout=30, allow_redirects=False).status_code == 200
    r = s.post(f"{site.url}/settings/tokens", data={"name": "x", "role": "write"}, timeout=30)
    assert r.status_code == 403


def test_a_gated_repo_shows_its_conditions_and_opens_once_accepted(site, page, unique) -> None:
    owner, reader = f"erin-{unique}", f"frank-{unique}"
    api = site.api(site.token(owner))
    repo_id = f"{owner}/gated"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b'{"hidden": true}\n', path_in_repo="config.json", repo_id=repo_id)
    api.update_repo_settings(repo_id, gated="auto")

    page.goto(f"{site.url}/{repo_id}/blob/main/config.json")
    assert "gated" in page.locator("#gate").inner_text()
    assert "hidden" not in page.locator(".file-view").inner_text()  # no preview before acceptance
    assert page.locator("#gate a:has-text('Sign in')").count() == 1

    sign_in(page, site, reader)
    page.goto(f"{site.url}/{repo_id}")
    page.click("#gate button:has-text('I agree')")
    assert "accepted the conditions" in page.locator(".messages").inner_text()
    assert page.locator("#gate").count() == 0
    page.goto(f"{site.url}/{repo_id}/blob/main/config.json")
    assert '"hidden": true' in page.locator(".file-view pre").inner_text()


def test_a_manual_gate_shows_the_request_waiting_and_its_owner_reviews_it_on_a_page(site, page, browser,
                                                                                      unique) -> None:
    """The reader asks, sees the request wait, then its rejection with the owner's reason, then the
    files; the owner handles it on the repo's access-requests page. No page breaks the CSP."""
    owner, reader = f"gina-{unique}", f"hank-{unique}"
    api = site.api(site.token(owner))
    repo_id = f"{owner}/reviewed"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b'{"reviewed": true}\n', path_in_repo="config.json", repo_id=repo_id)
    api.update_repo_settings(repo_id, gated="manual")
    page.add_init_script(CSP_WATCH)

    sign_in(page, site, reader)
    page.goto(f"{site.url}/{repo_id}")
    assert "request access" in page.locator("#gate h2").inner_text()
    page.click("#gate button:has-text('I agree')")
    assert "authors review each request" in page.locator(".messages").inner_text()
    assert page.locator("#gate[data-status=pending]").count() == 1
    page.goto(f"{site.url}/{repo_id}/blob/main/config.json")
    assert '"reviewed": true' not in page.locator(".file-view").inner_text()  # still closed
    page.click("#like button")  # and the reader likes it meanwhile
    assert page.locator("#likes").inner_text() == "1" and "Liked" in page.locator("#like").inner_text()

    boss = browser.new_context(viewport={"width": 1280, "height": 900})
    boss.set_default_timeout(20_000)
    op = boss.new_page()
    op.add_init_script(CSP_WATCH)
    sign_in(op, site, owner)
    op.goto(f"{site.url}/{repo_id}")
    op.click("#access-requests-link")
    row = op.locator(f"#requests-pending tr[data-user='{reader}']")
    row.locator("input[name=reason]").fill("Tell us your affiliation first")
    row.locator("button:has-text('Reject')").click()
    assert f"Rejected the request of {reader}" in op.locator(".messages").inner_text()
    assert op.locator(f"#requests-rejected tr[data-user='{reader}']").count() == 1
    shot(op, site, "access-requests")

    page.goto(f"{site.url}/{repo_id}")
    assert page.locator("#gate-reason").inner_text() == "Tell us your affiliation first"
    op.locator(f"#requests-rejected tr[data-user='{reader}'] button:has-text('Accept')").click()
    assert op.locator(f"#requests-accepted tr[data-user='{reader}']").count() == 1
    page.goto(f"{site.url}/{repo_id}")
    assert page.locator("#gate").count() == 0 and page.locator("#gate-granted").count() == 1
    page.goto(f"{site.url}/{repo_id}/blob/main/config.json")
    assert '"reviewed": true' in page.locator(".file-view pre").inner_text()
    assert page.evaluate("window.__csp") == [] and op.evaluate("window.__csp") == []
    boss.close()


def test_a_catalog_entry_turns_ready_once_mirrored(site, page, unique, tmp_path) -> None:
    import yaml

    org = f"mirrorme-{unique}"
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(yaml.safe_dump({"datasets": [{"repo_id": f"{org}/corpus", "title": "A corpus",
                                                     "summary": "Lines of text.", "size_bytes": 2_000_000_000}]}))
    site.manage("seed_catalog", "--file", str(catalog), "--no-samples")
    page.goto(f"{site.url}/datasets/{org}/corpus")
    assert "2 GB" in page.locator("#not-mirrored").inner_text()

    failed = site.manage("mirror", f"{org}/corpus", "--type", "dataset", "--source", str(tmp_path / "missing"),
                         check=False)
    assert failed.returncode != 0
    page.reload()
    assert "failed" in page.locator("#mirror-job").inner_text()

    source = tmp_path / "upstream"
    (source / "data").mkdir(parents=True)
    (source / "data" / "train.txt").write_text("hello\n" * 1000)
    (source / "README.md").write_text("---\nlicense: mit\n---\n# A corpus, mirrored\n")
    site.manage("mirror", f"{org}/corpus", "--type", "dataset", "--source", str(source))
    page.reload()
    assert page.locator("#not-mirrored").count() == 0 and page.locator("#mirror-job").count() == 0
    assert page.locator(".repo-head .badge.ready").count() == 1
    assert page.locator("article.markdown h1").inner_text() == "A corpus, mirrored"
    page.goto(f"{site.url}/datasets?q={org}&mirrored=yes")
    assert result_ids(page) == [f"{org}/corpus"]


# --- on a phone, and the small things a user review found -------------------------------------------

@pytest.fixture
def phone(browser):
    context = browser.new_context(viewport=PHONE, device_scale_factor=1, is_mobile=True, has_touch=True)
    context.set_default_timeout(20_000)
    pg = context.new_page()
    yield pg
    context.close()


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_every_page_fits_a_phone_screen(site, phone, unique) -> None:
    """At 390 px nothing scrolls the page sideways: a README's wide code block scrolls in its own box,
    the repo tabs all show, and the Datasets and Models links stay in the header."""
    one_backend(site)
    for path in ("/", "/datasets", "/models?q=qwen", "/datasets/hub-samples/wine", "/datasets/hub-samples/wine/tree/main",
                 "/THUDM/chatglm3-6b", "/datasets/hub-samples/wine/commits/main", "/accounts/login"):
        phone.goto(site.url + path)
        assert page_width(phone) <= PHONE["width"], path
        for name in ("Datasets", "Models"):
            link = phone.locator("header nav a", has_text=name)
            box = link.bounding_box()
            assert link.is_visible() and box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (path, name)
    phone.goto(f"{site.url}/datasets/hub-samples/wine")
    shot(phone, site, "phone-repo")
    for tab in phone.locator(".tabs a").all():
        box = tab.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], tab.inner_text()
    wide = phone.evaluate("Array.from(document.querySelectorAll('.markdown pre'))"
                          ".filter(p => p.scrollWidth > p.clientWidth).length")
    assert wide >= 1  # the scikit-learn description's table is wider than the screen: it scrolls inside
    phone.click("header nav a:has-text('Models')")
    phone.wait_for_url(re.compile(r".*/models$"))

    sign_in(phone, site, f"alice-{unique}")
    for path in ("/settings", "/settings/volume", "/settings/tokens", "/settings/instances"):
        phone.goto(site.url + path)
        assert page_width(phone) <= PHONE["width"], path
        assert phone.locator("header nav a", has_text="My volume").is_visible()
    shot(phone, site, "phone-volume")


def test_the_home_page_counts_what_its_links_list(site, page) -> None:
    one_backend(site)
    page.goto(site.url)
    stat = page.locator("#ready-stat")
    ready = int(stat.locator("b").inner_text().replace(",", ""))
    links = [(a.inner_text(), a.get_attribute("href")) for a in stat.locator("a").all()]
    assert [href for _, href in links] == ["/datasets?mirrored=yes", "/models?mirrored=yes"]
    listed = 0
    for text, href in links:
        n = int(text.split()[0].replace(",", ""))
        page.goto(site.url + href)
        assert total(page) == n, text
        listed += n
    assert listed == ready and ready >= 6  # four sample datasets and two tiny models at least


def test_volume_form_errors_show_on_the_volume_page(site, page, unique, tmp_path) -> None:
    """A rename onto an existing name, a path outside the volume or an upload onto an existing file:
    a message on the volume page, worded for its forms (the API keeps its own words)."""
    one_backend(site)
    alice = f"alice-{unique}"
    sign_in(page, site, alice)
    page.goto(f"{site.url}/settings/volume")
    page.fill("#dirname", "runs")
    page.click("#mkdir button")
    assert "Created the folder runs" in page.locator(".messages").inner_text()
    page.fill("#dirname", "runs")
    page.click("#mkdir button")
    assert "already there; nothing changed" in page.locator(".messages").inner_text()
    src = tmp_path / "hello.txt"
    src.write_bytes(b"first version\n")
    page.set_input_files("#file", str(src))
    page.click("#upload button")

    row = page.locator("#volume tr[data-path='hello.txt']")
    row.locator("input[name=dst]").fill("runs")
    row.locator("button:has-text('Rename')").click()
    assert page.url.endswith("/settings/volume") and page.locator(".error-page").count() == 0
    error = page.locator(".messages li.error").inner_text()
    assert error == "“runs” already exists: pick another name or delete it first."
    assert row.locator("input[name=dst]").input_value() == "runs"  # as typed, in that row only
    assert page.locator("#dirname").input_value() == ""
    shot(page, site, "volume-rename-clash")

    row.locator("input[name=dst]").fill("../../etc")
    row.locator("button:has-text('Rename')").click()
    assert page.url.endswith("/settings/volume")
    assert "Names cannot be empty, “.” or “..”" in page.locator(".messages li.error").inner_text()
    assert page.locator("#volume tr[data-path='hello.txt']").count() == 1

    # The same name again: refused unless "Replace" is ticked, and then said.
    src.write_bytes(b"second version, longer\n")
    page.set_input_files("#file", str(src))
    page.click("#upload button")
    assert "“hello.txt” already exists: tick “Replace a file of the same name”" in page.locator(".messages li.error").inner_text()
    with page.expect_download() as download:
        page.click("#volume a.download:has-text('hello.txt')")
    assert Path(download.value.path()).read_bytes() == b"first version\n"
    page.set_input_files("#file", str(src))
    page.check("#replace")
    page.click("#upload button")
    assert "Replaced hello.txt with the uploaded file (23 B); the previous version is gone." in page.locator(".messages").inner_text()
    with page.expect_download() as download:
        page.click("#volume a.download:has-text('hello.txt')")
    assert Path(download.value.path()).read_bytes() == b"second version, longer\n"
    assert page.locator("#volume tr[data-path='hello.txt'] td.muted").inner_text() == "just now"

    # The API's words for the same clash are unchanged.
    r = requests.post(f"{site.url}/api/volume/move", json={"src": "hello.txt", "dst": "runs"}, timeout=30,
                      headers={"Authorization": f"Bearer {site.token(alice)}"})
    assert r.status_code == 409 and "pass overwrite to replace it" in r.text


def test_instance_form_errors_show_on_the_instances_page(site, page, unique) -> None:
    one_backend(site)
    sign_in(page, site, f"alice-{unique}")
    page.goto(f"{site.url}/settings/instances")
    page.fill("#inst-name", "gpu-01")
    page.fill("#inst-repo", "hub-samples/nope")
    page.click("#register button")
    assert page.url.endswith("/settings/instances") and page.locator(".error-page").count() == 0
    assert page.locator(".messages li.error").inner_text() == "No dataset or model hub-samples/nope, or you cannot see it."
    assert page.locator("section.instance").count() == 0  # nothing registered
    shot(page, site, "instances-missing-repo")
    page.fill("#inst-name", "gpu-01")
    page.fill("#inst-repo", "hub-samples/tiny-gpt2")  # with "dataset" still picked in the list
    page.click("#register button")
    assert "“hub-samples/tiny-gpt2” is a model, not a dataset: choose “model”" in page.locator(".messages li.error").inner_text()
    page.select_option("#inst-type", "model")
    page.fill("#inst-name", "gpu-01")
    page.fill("#inst-repo", "hub-samples/tiny-gpt2")
    page.click("#register button")
    assert "Registered gpu-01" in page.locator("#new-instance").inner_text()
    box = page.locator("section.instance[data-name='gpu-01']")
    box.locator("input[name=repo]").fill("nobody/nothing")
    box.locator("button:has-text('Attach')").click()
    assert page.locator(".messages li.error").inner_text() == "No dataset or model nobody/nothing, or you cannot see it."
    page.on("dialog", lambda d: d.dismiss())
    page.locator("section.instance[data-name='gpu-01'] button:has-text('Revoke')").click()
    assert "online" not in page.locator("section.instance[data-name='gpu-01'] .status").inner_text()
    assert "revoked" not in page.locator("section.instance[data-name='gpu-01'] .status").inner_text()


def test_tokens_need_a_unique_name_and_a_confirmed_revoke(site, page, unique) -> None:
    one_backend(site)
    sign_in(page, site, f"alice-{unique}")
    page.goto(f"{site.url}/settings/tokens")
    assert page.locator("#token-name").get_attribute("required") is not None
    page.eval_on_selector("#token-name", "e => e.removeAttribute('required')")  # as a script or old browser would
    page.click("#create-token button")
    assert page.locator(".messages li.error").inner_text() == "Give the token a name, e.g. laptop or training-job."
    assert page.locator("#tokens tr[data-name]").count() == 0

    page.fill("#token-name", "laptop")
    page.click("#create-token button")
    assert page.locator("#new-token").count() == 1
    page.fill("#token-name", "Laptop ")
    page.click("#create-token button")
    assert "already have a token named “Laptop”" in page.locator(".messages li.error").inner_text()
    assert page.locator("#tokens tr[data-name]").count() == 1
    shot(page, site, "tokens-duplicate")

    questions: list[str] = []
    page.once("dialog", lambda d: (questions.append(d.message), d.dismiss()))
    page.locator("#tokens tr[data-name=laptop] button:has-text('Revoke')").click()
    assert questions and questions[0].startswith("Revoke the token laptop (hub_")
    assert "revoked" not in page.locator("#tokens tr[data-name=laptop]").inner_text()
    page.once("dialog", lambda d: d.accept())
    page.locator("#tokens tr[data-name=laptop] button:has-text('Revoke')").click()
    assert "no longer works" in page.locator(".messages").inner_text()
    page.fill("#token-name", "laptop")  # a revoked token's name is free again
    page.click("#create-token button")
    assert page.locator("#new-token").count() == 1


def test_a_refused_token_form_comes_back_as_it_was_typed_once(site, page, unique) -> None:
    one_backend(site)
    sign_in(page, site, f"alice-{unique}")
    page.goto(f"{site.url}/settings/tokens")
    page.fill("#token-name", "laptop")
    page.click("#create-token button")
    assert page.locator("#new-token").count() == 1
    assert page.locator("#token-name").input_value() == "" and page.locator("#token-role").input_value() == "read"

    page.fill("#token-name", "laptop")
    page.select_option("#token-role", "write")
    page.click("#create-token button")
    assert "already have a token named “laptop”" in page.locator(".messages li.error").inner_text()
    assert page.locator("#token-name").input_value() == "laptop"
    assert page.locator("#token-role").input_value() == "write"
    shot(page, site, "tokens-refused-refilled")

    page.reload()  # kept for the one page the refusal leads to
    assert page.locator(".messages").count() == 0
    assert page.locator("#token-name").input_value() == "" and page.locator("#token-role").input_value() == "read"


def test_a_refused_attach_refills_that_form_only(site, page, unique) -> None:
    one_backend(site)
    sign_in(page, site, f"alice-{unique}")
    page.goto(f"{site.url}/settings/instances")
    for name in ("gpu-01", "gpu-02"):
        page.fill("#inst-name", name)
        page.click("#register button")
        assert f"Registered {name}" in page.locator("#new-instance").inner_text()
    box = page.locator("section.instance[data-name='gpu-01']")
    box.locator("select[name=type]").select_option("model")
    box.locator("input[name=repo]").fill("nobody/nothing")
    box.locator("input[name=revision]").fill("v1")
    box.locator("button:has-text('Attach')").click()
    assert page.locator(".messages li.error").inner_text() == "No dataset or model nobody/nothing, or you cannot see it."
    assert box.locator("select[name=type]").input_value() == "model"
    assert box.locator("input[name=repo]").input_value() == "nobody/nothing"
    assert box.locator("input[name=revision]").input_value() == "v1"
    other = page.locator("section.instance[data-name='gpu-02']")
    assert other.locator("input[name=repo]").input_value() == "" and other.locator("select[name=type]").input_value() == "dataset"
    assert page.locator("#inst-name").input_value() == "" and page.locator("#inst-repo").input_value() == ""

    page.goto(f"{site.url}/settings/instances")
    assert box.locator("input[name=repo]").input_value() == ""


def test_counts_and_times_read_as_english(site, page, unique) -> None:
    one_backend(site)
    owner = f"gina-{unique}"
    api = site.api(site.token(owner))
    repo_id = f"{owner}/once"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b"# once\n", path_in_repo="README.md", repo_id=repo_id)
    assert requests.get(f"{site.url}/{repo_id}/resolve/main/README.md", timeout=30).ok  # one download
    page.goto(f"{site.url}/models?q={owner}")
    meta = page.locator("#results .card .meta").inner_text()
    assert "1 download" in meta and "1 downloads" not in meta
    assert "updated just now" in meta and "0 minutes" not in meta
    page.goto(f"{site.url}/{repo_id}/tree/main")
    assert "2 files" in page.locator(".box .head").inner_text()  # README.md and .gitattributes
    page.goto(f"{site.url}/{repo_id}/commits/main")
    assert "2 commits" in page.locator(".box .head").inner_text()
    page.goto(f"{site.url}/{repo_id}")
    assert page.locator(".side dd").filter(has_text="just now").count() == 1

    # An empty search points to the other kind where its words match.
    page.goto(f"{site.url}/datasets?q=qwen")
    assert total(page) == 0
    link = page.locator("#elsewhere a")
    n = int(link.inner_text().split()[0])
    assert link.inner_text() == f"{n} models match “qwen” →" and n > 1
    link.click()
    page.wait_for_url(re.compile(r".*/models\?q=qwen$"))
    assert total(page) == n
    page.goto(f"{site.url}/models?q=zzzqqqxxx")
    assert page.locator("#elsewhere").count() == 0


def test_the_use_it_snippets_keep_identifiers_whole(site, page) -> None:
    one_backend(site)
    page.goto(f"{site.url}/THUDM/chatglm3-6b")
    python = page.locator("#use-it .snippet", has_text="Python").locator("pre").inner_text()
    assert 'AutoTokenizer.from_pretrained("THUDM/chatglm3-6b", trust_remote_code=True)' in python
    assert 'AutoModel.from_pretrained("THUDM/chatglm3-6b", trust_remote_code=True)' in python
    assert "trust_remote_code=True" in page.locator(".side dl").inner_text()
    # Long lines wrap at spaces, never mid-identifier: the snippets fit their box (nothing cut off)
    # and every identifier is still on one line.
    styles = page.evaluate("Array.from(document.querySelectorAll('#use-it pre'))"
                           ".map(p => [getComputedStyle(p).whiteSpace, getComputedStyle(p).overflowWrap,"
                           " p.scrollWidth <= p.clientWidth])")
    assert all(ws == "pre-wrap" and wrap == "normal" and fits for ws, wrap, fits in styles), styles
    shot(page, site, "chatglm")
    page.goto(f"{site.url}/hub-samples/tiny-gpt2")  # its entry says nothing of remote code
    assert "trust_remote_code" not in page.locator("#use-it").inner_text()


def test_pages_have_a_favicon(site, page) -> None:
    one_backend(site)
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    page.goto(site.url)
    page.wait_for_load_state("networkidle")
    assert missing == []
    icon = page.locator("link[rel=icon]").get_attribute("href")
    r = requests.get(site.url + icon, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("image/svg+xml") and b"<svg" in r.content
    r = requests.get(f"{site.url}/favicon.ico", timeout=30)
    assert r.status_code == 200 and r.content.startswith(b"<svg") and r.history[0].status_code in (301, 302)


def test_models_ns_name_leads_to_the_model_page(site, page) -> None:
    one_backend(site)
    r = requests.get(f"{site.url}/models/hub-samples/tiny-gpt2", allow_redirects=False, timeout=30)
    assert r.status_code == 301 and r.headers["Location"] == "/hub-samples/tiny-gpt2"
    r = requests.get(f"{site.url}/models/hub-samples/tiny-gpt2/tree/main?after=a", allow_redirects=False, timeout=30)
    assert r.status_code == 301 and r.headers["Location"] == "/hub-samples/tiny-gpt2/tree/main?after=a"
    page.goto(f"{site.url}/models/hub-samples/tiny-gpt2/blob/main/config.json")
    assert page.url == f"{site.url}/hub-samples/tiny-gpt2/blob/main/config.json"
    assert "n_embd" in page.locator(".file-view pre").inner_text()
    assert page.goto(f"{site.url}/models").status == 200 and total(page) >= 50  # the list is still the list
    assert page.goto(f"{site.url}/models/nobody/nothing").status == 404


def test_tokens_show_their_expiry_and_a_refused_form_keeps_the_one_picked(site, page, unique) -> None:
    import time

    # Both backends: whether an expired token's name is free again is a query with a time in it.
    alice = f"alice-{unique}"
    site.manage("hub_token", alice, "--name", "ci-run", "--expires", "1s")
    dead_after = time.time() + 1.5
    site.manage("hub_token", alice, "--name", "forever")
    sign_in(page, site, alice)
    time.sleep(max(0.0, dead_after - time.time()))
    page.goto(f"{site.url}/settings/tokens")
    assert page.locator("#token-expires").input_value() == "30d"  # the form's default
    page.fill("#token-name", "laptop")
    page.select_option("#token-expires", "7d")
    page.click("#create-token button")
    assert page.locator("#new-token").count() == 1

    def expires(name: str) -> str:  # of the first row of that name: the live one, when there are two
        return page.locator(f"#tokens tr[data-name='{name}'] td.expires").first.inner_text().replace("\xa0", " ")

    assert expires("laptop") == "in 7 days"
    assert expires("forever") == "never"
    assert re.fullmatch(r"expired (just now|\d+ minutes? ago)", expires("ci-run")), expires("ci-run")
    expired = page.locator("#tokens tr[data-name='ci-run']")
    assert expired.get_attribute("class") == "expired" and expired.locator("button").count() == 0
    assert page.locator("#tokens tr[data-name]").evaluate_all("rows => rows.map(r => r.dataset.name)") == [
        "laptop", "forever", "ci-run"]  # the live ones first, newest first
    shot(page, site, "tokens-expiry")

    page.fill("#token-name", "laptop")
    page.select_option("#token-expires", "90d")
    page.click("#create-token button")
    assert "already have a token named “laptop”" in page.locator(".messages li.error").inner_text()
    assert page.locator("#token-expires").input_value() == "90d"
    page.fill("#token-name", "ci-run")  # an expired token's name is free again
    page.select_option("#token-expires", "never")
    page.click("#create-token button")
    assert page.locator("#new-token").count() == 1
    assert expires("ci-run") == "never"
    assert page.locator("#tokens tr[data-name]").evaluate_all("rows => rows.map(r => r.dataset.name)") == [
        "ci-run", "laptop", "forever", "ci-run"]
    assert page.locator("#token-expires").input_value() == "30d"


def test_every_page_works_under_the_content_security_policy(site, page, unique) -> None:
    """Every kind of page — the catalog, a repo's card, files, file, history, commit and refs, the
    error pages, sign-in, the account pages and the Django admin — is served with a policy that runs
    no inline script (and no plugin, and cannot be framed), and shows no violation of it in
    Chromium: its scripts come from the hub's own file, and still work (the confirm dialogs, filters
    that apply on change, Back on an error page)."""
    one_backend(site)
    root = f"root-{unique}"
    site.manage("hub_password", root, "--password", PASSWORD)
    site.manage("shell", "-c", "from django.contrib.auth import get_user_model; "
                f"get_user_model().objects.filter(username='{root}').update(is_superuser=True, is_staff=True)")
    repo = "scikit-learn/iris"
    api = site.api(site.token(root))
    csv = next(f for f in api.list_repo_files(repo, repo_type="dataset") if f.endswith(".csv"))
    head = api.dataset_info(repo).sha
    repo_pk = site.manage("shell", "-c", "from hub.repos.models import Repo; "
                          "print(Repo.objects.get(namespace__name='scikit-learn', name='iris', type='dataset').pk)"
                          ).stdout.strip().splitlines()[-1]
    page.add_init_script(CSP_WATCH)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)

    def visit(path: str, status: int = 200) -> None:
        resp = page.goto(site.url + path)
        assert resp.status == status, (path, resp.status)
        policy = resp.headers.get("content-security-policy", "")
        directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
        assert directives.get("script-src") == ["'self'"], (path, policy)
        assert directives.get("object-src") == ["'none'"] and directives.get("frame-ancestors") == ["'none'"], policy
        page.wait_for_load_state("load")
        assert page.evaluate("window.__csp") == [], (path, page.evaluate("window.__csp"))

    anonymous = ["/", "/datasets", "/models?q=qwen", f"/datasets/{repo}", f"/datasets/{repo}/tree/main",
                 f"/datasets/{repo}/blob/main/{csv}", f"/datasets/{repo}/commits/main",
                 f"/datasets/{repo}/commit/{head}", f"/datasets/{repo}/refs", "/accounts/login"]
    for path in anonymous:
        visit(path)
    visit("/nobody/nothing", 404)
    # The filters apply as soon as one changes: hub.js runs.
    visit("/datasets")
    page.select_option("#f-mirrored", "yes")
    page.wait_for_url(re.compile(r".*mirrored=yes.*"))
    # Back on an error page goes back.
    visit("/datasets")
    visit("/datasets/nobody/nothing", 404)
    page.click("a[data-back]")
    page.wait_for_url(re.compile(r".*/datasets$"))

    sign_in(page, site, root)
    for path in ["/settings", "/settings/volume", "/settings/tokens", "/settings/instances", "/admin/",
                 "/admin/auth/user/", "/admin/auth/user/add/", "/admin/repos/repo/?private__exact=0",
                 f"/admin/repos/repo/{repo_pk}/change/", "/admin/quotas/plan/add/"]:
        visit(path)
    # A destroying button still asks first: the dialog appears, and dismissing it keeps the token.
    visit("/settings/tokens")
    page.fill("#token-name", "kept")
    page.click("#create-token button")
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.locator("#tokens tr[data-name='kept'] button").click()
    assert asked and "Revoke the token kept" in asked[0]
    assert page.locator("#tokens tr[data-name='kept'] button").count() == 1  # not revoked
    assert page.evaluate("window.__csp") == [] and console == [], console
    shot(page, site, "csp-tokens")


def test_every_snippet_has_a_copy_button_that_copies_it(site, browser) -> None:
    one_backend(site)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    try:
        page = context.new_page()
        page.goto(f"{site.url}/datasets/ILSVRC/imagenet-1k")
        snippets = page.locator("#use-it .snippet")
        assert snippets.count() >= 4 and page.locator("#use-it .snippet button.copy").count() == snippets.count()
        assert page.locator("#not-mirrored button.copy").count() == 1  # the operator's mirror command too
        python = snippets.filter(has_text="Python")
        python.locator("button.copy").click()
        # (the label changes once the clipboard took the text, a promise later, and for 1.5 s)
        from playwright.sync_api import expect

        expect(python.locator("button.copy")).to_have_text("Copied", timeout=5000)
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == python.locator("pre").inner_text().rstrip("\n")
        assert copied.startswith(f"export HF_ENDPOINT={site.url}\n") and 'load_dataset("ILSVRC/imagenet-1k")' in copied
        shot(page, site, "snippet-copied")
    finally:
        context.close()

