"""The pages in Simplified Chinese as well as English.

* The translation is complete and in step: every msgid of locale/zh_Hans/LC_MESSAGES/django.po is
  translated (nothing empty, nothing fuzzy); `makemessages` run over a copy of the code finds no
  string the .po lacks (a new template or page string must come with its translation); the
  committed django.mo holds what msgfmt makes of the .po (a fresh clone needs no compile step).
* In a real Chromium, an anonymous visitor whose browser asks for Chinese (Accept-Language zh-CN)
  gets the home page, a search, a model and a dataset in Chinese, catalog entries with their
  Chinese title and summary (the English ones where they have none); one who asks for nothing gets
  English. The header's switch changes the language of the page it is on, and the choice is kept
  in the session (anonymous or signed in) as one moves on, until switched back.
* A page kept in the page cache for one language is never served in the other.

Screenshots of each page in each language go to tests/artifacts/screenshots/ (embedded-i18n-*.png).
"""
from __future__ import annotations

import gettext
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests
import yaml

from tests.conftest import one_backend
from tests.support.servers import PYTHON, ROOT, base_env
from tests.support.web import SHOTS
from tests.test_web import CHROMIUM, PASSWORD

LOCALE = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES"
PO, MO = LOCALE / "django.po", LOCALE / "django.mo"
SEED = ROOT / "hub" / "catalog" / "seed" / "catalog.yaml"
ZH = {"Accept-Language": "zh-CN,zh;q=0.9"}
in_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")


# --- the translation files ---------------------------------------------------------------------------

def entries(text: str) -> list[dict]:
    """The entries of a .po file (the header and obsolete ones left out): context, msgid, plural,
    the msgstrs and whether it is fuzzy."""
    def joined(block: str, keyword: str) -> list[str]:
        return ["".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m)) for m in
                re.findall(rf'^{keyword} ((?:".*"\n?)+)', block, re.M)]

    out = []
    for block in text.split("\n\n"):
        block = "\n".join(line for line in block.splitlines() if not line.startswith("#~")) + "\n"
        ids = joined(block, "msgid")
        if not ids or not ids[0]:
            continue
        out.append({"context": (joined(block, "msgctxt") or [None])[0], "msgid": ids[0],
                    "plural": (joined(block, "msgid_plural") or [None])[0],
                    "msgstr": joined(block, r"msgstr(?:\[\d+\])?"),
                    "fuzzy": any(line.startswith("#,") and "fuzzy" in line for line in block.splitlines())})
    return out


def needs(tool: str) -> str:
    found = shutil.which(tool)
    if not found:
        pytest.fail(f"{tool} is missing: install gettext (scripts/test.sh does: apt-get install gettext)")
    return found


def test_every_msgid_is_translated() -> None:
    found = entries(PO.read_text(encoding="utf-8"))
    assert len(found) > 400
    untranslated = [e["msgid"] for e in found if not all(e["msgstr"]) or not e["msgstr"]]
    fuzzy = [e["msgid"] for e in found if e["fuzzy"]]
    assert not untranslated and not fuzzy, f"untranslated: {untranslated}; fuzzy: {fuzzy}"
    header = PO.read_text(encoding="utf-8").split("\n\n")[0]
    assert "#, fuzzy" not in header and "Plural-Forms: nplurals=1; plural=0;" in header


def test_makemessages_finds_no_string_the_po_lacks(tmp_path) -> None:
    """makemessages over a copy of the code (the working tree is left alone): its msgids are the
    committed .po's, so a string added to a template or a page without its translation fails here."""
    needs("xgettext")
    needs("msgmerge")
    copy = tmp_path / "tree"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "static")
    for name in ("hub", "templates", "locale"):
        shutil.copytree(ROOT / name, copy / name, ignore=skip)
    shutil.copy(ROOT / "manage.py", copy)
    env = base_env() | {"PYTHONPATH": str(copy), "HUB_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([PYTHON, "manage.py", "makemessages", "-l", "zh_Hans", "--no-location", "--no-obsolete"],
                         cwd=copy, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    key = lambda e: (e["context"], e["msgid"], e["plural"])  # noqa: E731
    fresh = {key(e) for e in entries((copy / "locale/zh_Hans/LC_MESSAGES/django.po").read_text(encoding="utf-8"))}
    committed = {key(e) for e in entries(PO.read_text(encoding="utf-8"))}
    assert not fresh - committed, f"strings not in the .po (run makemessages and translate them): {sorted(fresh - committed)}"
    assert not committed - fresh, f"strings no page uses any more: {sorted(committed - fresh)}"


def test_the_committed_mo_is_compiled_from_the_po(tmp_path) -> None:
    compiled = tmp_path / "django.mo"
    out = subprocess.run([needs("msgfmt"), "--check", "-o", str(compiled), str(PO)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    with MO.open("rb") as committed, compiled.open("rb") as fresh:
        assert gettext.GNUTranslations(committed)._catalog == gettext.GNUTranslations(fresh)._catalog, (
            "locale/zh_Hans/LC_MESSAGES/django.mo is older than its .po: msgfmt -o django.mo django.po")


# --- the pages in Chromium --------------------------------------------------------------------------

def zh_title(repo_id: str) -> tuple[str, str]:
    """The seed file's Chinese and English title of an entry."""
    for row in (yaml.safe_load(SEED.read_text(encoding="utf-8")) or {}).get("models", []) + \
            (yaml.safe_load(SEED.read_text(encoding="utf-8")) or {}).get("datasets", []):
        if row["repo_id"] == repo_id:
            return row["title_zh"], row["title"]
    raise AssertionError(f"{repo_id} is not in the seed file")


@pytest.fixture(scope="module")
def zh_site(hub, tmp_path_factory):
    """The embedded hub with the real seed catalog, plus an entry of our own with a Chinese title
    and summary and one with English only, seeded through a seed file as the catalog is."""
    one_backend(hub)
    out = hub.manage("seed_catalog", check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = {"datasets": [
        {"repo_id": "i18n-test/zh-dialogue", "title": "Dialogue corpus for the i18n test",
         "summary": "Chinese multi-turn dialogues, seeded by tests/test_i18n.py.",
         "title_zh": "国际化测试用中文对话语料", "summary_zh": "由 tests/test_i18n.py 写入的中文多轮对话。",
         "license": "mit", "tasks": ["text-generation"], "modality": ["text"], "languages": ["zh"],
         "size_bytes": 12_000_000, "file_count": 3, "homepage": "", "paper": ""},
        {"repo_id": "i18n-test/english-only", "title": "English-only corpus for the i18n test",
         "summary": "It has no Chinese title: Chinese pages show this one.", "license": "mit",
         "tasks": ["text-generation"], "modality": ["text"], "languages": ["en"], "size_bytes": 1_000_000,
         "file_count": 1, "homepage": "", "paper": ""}], "models": []}
    path = tmp_path_factory.mktemp("i18n") / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    out = hub.manage("seed_catalog", "--file", str(path), "--no-samples", check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return hub


def new_page(browser, headers: dict[str, str] | None = None):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=headers or {})
    context.set_default_timeout(20_000)
    return context, context.new_page()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"embedded-i18n-{name}.png"), full_page=True)


@in_chromium
def test_the_pages_follow_the_browsers_language(zh_site, browser) -> None:
    chatglm_zh, chatglm_en = zh_title("THUDM/chatglm3-6b")
    sharegpt_zh, sharegpt_en = zh_title("shareAI/ShareGPT-Chinese-English-90k")
    for lang, headers in (("zh", ZH), ("en", {})):
        context, page = new_page(browser, headers)
        zh = lang == "zh"
        page.goto(zh_site.url)
        assert page.locator("html").get_attribute("lang") == ("zh-Hans" if zh else "en")
        nav = page.locator("header nav").inner_text()
        assert ("数据集" in nav and "模型" in nav) if zh else ("Datasets" in nav and "Models" in nav)
        assert page.locator(".hero h1").inner_text() == ("数据集与模型，就在你的 GPU 旁边" if zh else
                                                         "Datasets and models, next to your GPUs")
        cards = page.locator(".card .sub").all_inner_texts()
        assert (chatglm_zh in cards) if zh else (chatglm_en in cards and chatglm_zh not in cards)
        current = page.locator("#language button[aria-current]").inner_text()
        assert current == ("简体中文" if zh else "English")
        shot(page, f"home-{lang}")

        page.goto(f"{zh_site.url}/datasets?q=i18n-test")
        assert page.locator(".searchbar button").inner_text() == ("搜索" if zh else "Search")
        assert page.locator("label[for=f-sort]").inner_text() == ("排序方式" if zh else "Sort by")
        subs = page.locator("#results .card .sub").all_inner_texts()
        summaries = page.locator("#results .card .summary").all_inner_texts()
        if zh:
            assert "国际化测试用中文对话语料" in subs and "由 tests/test_i18n.py 写入的中文多轮对话。" in summaries
            assert "English-only corpus for the i18n test" in subs  # no Chinese title: the English one
            assert "Dialogue corpus for the i18n test" not in subs
        else:
            assert "Dialogue corpus for the i18n test" in subs and "国际化测试用中文对话语料" not in subs
        shot(page, f"datasets-search-{lang}")

        page.goto(f"{zh_site.url}/THUDM/chatglm3-6b")
        assert page.locator(".repo-head .subtitle").inner_text() == (chatglm_zh if zh else chatglm_en)
        assert page.locator(".tabs").inner_text().startswith("模型卡片" if zh else "Model card")
        assert page.locator("#use-it .head b").inner_text() == ("使用方法" if zh else "Use it")
        assert "hub pull THUDM/chatglm3-6b" in page.locator("#use-it").inner_text()  # code stays code
        shot(page, f"model-{lang}")

        page.goto(f"{zh_site.url}/datasets/shareAI/ShareGPT-Chinese-English-90k")
        assert page.locator(".repo-head .subtitle").inner_text() == (sharegpt_zh if zh else sharegpt_en)
        assert page.locator(".badge.kind").inner_text() == ("数据集" if zh else "Dataset")
        notice = page.locator("#not-mirrored").inner_text()
        assert ("尚未同步到本站" in notice) if zh else ("not on this hub yet" in notice)
        shot(page, f"dataset-{lang}")
        context.close()


@in_chromium
def test_the_header_switch_keeps_the_language_in_the_session(zh_site, browser, unique) -> None:
    context, page = new_page(browser)  # the browser asks for no language: English
    page.goto(f"{zh_site.url}/datasets?q=dialogue&language=zh")
    assert page.locator("html").get_attribute("lang") == "en"
    page.click("#language button[value=zh-hans]")  # a form: no script needed
    page.wait_for_load_state()
    assert page.url == f"{zh_site.url}/datasets?q=dialogue&language=zh"  # back on the same page
    assert page.locator("html").get_attribute("lang") == "zh-Hans"
    assert page.locator(".toolbar h1").inner_text().startswith("数据集")
    assert page.locator("#language button[aria-current]").inner_text() == "简体中文"
    shot(page, "switched-zh")

    # It stays Chinese on the next page, from the session alone (the cookie dropped).
    cookies = [c for c in context.cookies() if c["name"] != "django_language"]
    assert any(c["name"] == "sessionid" for c in cookies)
    context.clear_cookies()
    context.add_cookies(cookies)
    page.click("header nav a[href='/models']")
    page.wait_for_url(re.compile(r".*/models$"))
    assert page.locator("header nav").inner_text().split() == ["数据集", "模型"]
    assert page.locator(".toolbar h1").inner_text().startswith("模型")

    page.click("#language button[value=en]")
    page.wait_for_url(re.compile(r".*/models$"))
    assert page.locator(".toolbar h1").inner_text().startswith("Models")
    page.goto(f"{zh_site.url}/datasets/i18n-test/zh-dialogue")
    assert page.locator(".repo-head .subtitle").inner_text() == "Dialogue corpus for the i18n test"

    # Signed in: the choice made before signing in carries over, and a new one follows the session.
    alice = f"alice-{unique}"
    zh_site.manage("hub_password", alice, "--password", PASSWORD)
    page.click("#language button[value=zh-hans]")
    page.wait_for_load_state()
    page.goto(f"{zh_site.url}/accounts/login")
    page.fill("#id_username", alice)
    page.fill("#id_password", PASSWORD)
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r".*/settings$"))
    assert "概览与配额" in page.locator(".account .menu").inner_text()
    page.click("#language button[value=en]")
    page.wait_for_url(re.compile(r".*/settings$"))
    page.click(".account .menu a[href='/settings/tokens']")
    assert page.locator("main h1").inner_text() == "API tokens"
    page.click("#language button[value=zh-hans]")
    page.wait_for_url(re.compile(r".*/settings/tokens$"))
    assert page.locator("main h1").inner_text() == "API 令牌"
    shot(page, "tokens-zh")
    context.close()


def test_a_cached_page_is_never_served_in_the_other_language(zh_site, unique) -> None:
    """Anonymous list pages are kept in the page cache (HUB_PAGE_CACHE_SECONDS): per language."""
    url = f"{zh_site.url}/datasets?q=cache-{unique}"
    english = requests.get(url, timeout=30)
    chinese = requests.get(url, headers=ZH, timeout=30)
    again = requests.get(url, timeout=30)
    assert "Search datasets by name" in english.text and "搜索" not in english.text.split("<main")[1]
    assert "按名称、标题、任务、语言搜索数据集" in chinese.text and chinese.headers["Content-Language"] == "zh-hans"
    assert "Search datasets by name" in again.text and "按名称" not in again.text  # (from the cache, or fresh)
    assert "Accept-Language" in english.headers["Vary"] and "Cookie" in english.headers["Vary"]
    # The API answers in English whatever is asked.
    api = requests.get(f"{zh_site.url}/api/models/nobody/nothing", headers=ZH, timeout=30)
    assert api.status_code in (401, 404) and api.headers.get("Content-Language", "").startswith("en")


def test_a_service_error_is_in_chinese_on_a_page_and_in_english_through_the_api(zh_site, unique) -> None:
    """The services' error messages are translated where they are raised: a form on a Chinese page
    shows one in Chinese, while the API, which answers in English whatever is asked, keeps it English."""
    bob = f"bob-{unique}"
    s = zh_site.session(bob, PASSWORD)
    s.headers.update(ZH)

    def form_post(path: str, data: dict) -> requests.Response:
        return s.post(f"{zh_site.url}{path}", data=data | {"csrfmiddlewaretoken": s.cookies["csrftoken"]},
                      headers={"Referer": f"{zh_site.url}{path}"}, timeout=30)

    assert form_post("/settings/volume/mkdir", {"path": "", "name": "shelf"}).status_code == 200
    page = form_post("/settings/volume/rename", {"src": "shelf", "dst": "shelf/inner"})
    assert page.status_code == 200 and page.headers["Content-Language"] == "zh-hans"
    assert "不能将 &#x27;shelf&#x27; 移动到它自身之中（&#x27;shelf/inner&#x27;）。" in page.text, page.text[-3000:]
    assert "into itself" not in page.text

    api = requests.post(f"{zh_site.url}/api/volume/move", json={"src": "shelf", "dst": "shelf/inner"},
                        headers=ZH | {"Authorization": f"Bearer {zh_site.token(bob)}"}, timeout=30)
    assert api.status_code == 400
    assert "cannot move 'shelf' into itself ('shelf/inner')" in api.text and "移动" not in api.text
