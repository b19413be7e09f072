"""fsspec's own abstract test suites (fsspec.tests.abstract) against `hub://volume/...`, as s3fs runs
them: copy within the volume, get from it, put into it, open and pipe with exclusive creation. None
is skipped or expected to fail.

Each test works in a fresh directory of alice's volume on a live test hub, through a filesystem
built the way a user builds one (endpoint and token, nothing else). The 137 tests take about 85 s on
the embedded backend and 150 s on PostgreSQL + Ceph RGW, so they run on the embedded backend only:
what differs on S3 (presigned URLs, multipart parts) is covered by test_volume_client.py on both.
"""
from __future__ import annotations

import posixpath
import uuid

import fsspec
import pytest
from fsspec.tests import abstract

from storage.fs.hubfs import HubFileSystem


class HubVolumeFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, embedded_hub) -> HubFileSystem:
        token = embedded_hub.cached_token("alice")
        return fsspec.filesystem("hub", endpoint=embedded_hub.url, token=token, skip_instance_cache=True)

    @pytest.fixture
    def fs_join(self):
        return posixpath.join

    @pytest.fixture
    def fs_path(self, fs):
        path = f"volume/fsspec-{uuid.uuid4().hex[:8]}"
        fs.mkdir(path)
        yield path
        if fs.exists(path):
            fs.rm(path, recursive=True)

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return True  # the volume has real directories


class TestHubVolumeCopy(abstract.AbstractCopyTests, HubVolumeFixtures):
    pass


class TestHubVolumeGet(abstract.AbstractGetTests, HubVolumeFixtures):
    pass


class TestHubVolumePut(abstract.AbstractPutTests, HubVolumeFixtures):
    pass


class TestHubVolumeOpen(abstract.AbstractOpenTests, HubVolumeFixtures):
    pass


class TestHubVolumePipe(abstract.AbstractPipeTests, HubVolumeFixtures):
    pass
