"""Fixtures for huggingface_hub's own tests, run against one of our hubs by scripts/hf-suite.sh.

The sdist ships its tests without their conftest.py; scripts/hf_suite/harness.py installs this file in
its place (as tests/conftest.py of the unpacked copy). It gives the fixtures those tests ask for, with
the meaning upstream gives them, pointed at our hub (whose URL and tokens the harness wrote into
testing_constants.py), and it skips, with the reason, the tests that need something only huggingface.co
has. It never changes what a test does or asserts.
"""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Protocol

import pytest
from huggingface_hub import HfApi, RepoUrl, constants
from huggingface_hub.utils import SoftTemporaryDirectory, _auth, _detect_agent

from .testing_constants import ENDPOINT_STAGING, TOKEN
from .testing_utils import repo_name

# Marker → why its tests cannot run here: the suite tags tests that talk to huggingface.co itself
# ("production"), and this hub has no route there; git_lfs tests clone over git, which this hub does
# not serve (upstream skips them too unless RUN_GIT_LFS_TESTS=1).
SKIPPED_MARKERS: dict[str, str] = {
    "production": "needs huggingface.co itself (marked production): not reachable from here, not our hub",
}
if os.environ.get("RUN_GIT_LFS_TESTS") != "1":
    SKIPPED_MARKERS["git_lfs"] = "needs git + git-lfs over HTTP (marked git_lfs; set RUN_GIT_LFS_TESTS=1 to try)"

MARKERS = {
    "transfer": "upload/download test (upstream's CI suite marker)",
    "api": "API test (upstream's CI suite marker)",
    "inference": "inference test (upstream's CI suite marker)",
    "xet": "needs hf_xet; Xet is forced on for it",
    "no_xet": "must run without hf_xet",
    "deprecated": "expects a FutureWarning naming the given functions",
    "vcr": "replays recorded HTTP (pytest-vcr)",
    **{name: reason for name, reason in SKIPPED_MARKERS.items()},
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker, reason in SKIPPED_MARKERS.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.fixture(autouse=True)
def isolated_hf_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test gets an empty cache and token store, as upstream's tests assume: a file one test
    downloaded, or a token one test saved with login(), must not change what the next one sees."""
    with SoftTemporaryDirectory() as home:
        monkeypatch.setattr(constants, "HF_HOME", home)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", os.path.join(home, "hub"))
        monkeypatch.setattr(constants, "HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub"))
        monkeypatch.setattr(constants, "HF_XET_CACHE", os.path.join(home, "xet"))
        monkeypatch.setattr(constants, "HF_ASSETS_CACHE", os.path.join(home, "assets"))
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", os.path.join(home, "token"))
        monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", os.path.join(home, "stored_tokens"))
        yield


@pytest.fixture(autouse=True)
def xet_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The markers' upstream meaning. The run uses the client's default settings (hf_xet installed,
    Xet on, as users run it); a test marked `xet` gets Xet on even if the caller's shell disabled it,
    one marked `no_xet` is skipped, since hf_xet is installed."""
    if request.node.get_closest_marker("xet") is not None:
        if importlib.util.find_spec("hf_xet") is None:
            pytest.skip("marked xet: needs hf_xet, which is not installed")
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
        monkeypatch.delenv("HF_HUB_DISABLE_XET", raising=False)
    elif request.node.get_closest_marker("no_xet") is not None and importlib.util.find_spec("hf_xet") is not None:
        pytest.skip("marked no_xet: must run without hf_xet, which is installed")


@pytest.fixture(autouse=True)
def deterministic_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """State the client keeps per process, reset so results do not depend on test order or on the
    shell that runs the harness: the OAuth-refresh decision get_token() caches, the AI-agent
    detection that would add the caller's agent to the User-Agent (and fetch a registry from the hub),
    and the experimental-feature warnings."""
    monkeypatch.setattr(_auth, "_OAUTH_REFRESH_CACHE", None, raising=False)
    monkeypatch.setattr(_detect_agent, "_registry", _detect_agent._EMPTY_REGISTRY)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_EXPERIMENTAL_WARNING", True)


@pytest.fixture(scope="session")
def api() -> HfApi:
    """The suite's main user (TOKEN) on our hub: upstream's is the same user on its staging hub."""
    return HfApi(endpoint=ENDPOINT_STAGING, token=TOKEN)


@pytest.fixture
def api_prod() -> HfApi:
    """Upstream: an anonymous client of huggingface.co itself, for read-only tests of real repos."""
    pytest.skip(SKIPPED_MARKERS["production"])


class RepoFactory(Protocol):
    """What `repo_factory` returns (test_hf_api imports this name from here): call it to create a
    repo on the hub; it is deleted when the test ends."""

    def __call__(self, repo_type: str = "model", **kwargs) -> RepoUrl: ...


@pytest.fixture
def repo_factory(api: HfApi) -> Iterator[RepoFactory]:
    """Creates repos named like upstream's (`<type>-<hex>-<timestamp>`) and deletes them after the
    test, as whichever token created them (a test may create one as OTHER_TOKEN)."""
    created: list[tuple[str, str, str | None]] = []

    def create(repo_type: str = "model", **kwargs) -> RepoUrl:
        kwargs.setdefault("repo_id", repo_name(prefix=repo_type))
        if repo_type == "space":
            kwargs.setdefault("space_sdk", "gradio")
        url = api.create_repo(repo_type=repo_type, **kwargs)
        created.append((url.repo_id, repo_type, kwargs.get("token")))
        return url

    yield create

    for repo_id, repo_type, token in created:
        try:
            api.delete_repo(repo_id=repo_id, repo_type=repo_type, token=token)
        except Exception:
            pass  # the test may have deleted or moved it; a leftover on a scratch hub is harmless
