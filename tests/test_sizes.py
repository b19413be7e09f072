"""One reading of sizes for the hub's settings and the client's options (storage.sizes)."""
from __future__ import annotations

import pytest

from storage.sizes import format_size, parse_size


@pytest.mark.parametrize("text, n", [
    ("1024", 1024), ("0", 0), ("512B", 512),
    ("50M", 50 * 2**20), ("8m", 8 * 2**20), ("2G", 2 * 2**30), ("1T", 2**40), ("4K", 4096),
    ("32MiB", 32 * 2**20), ("1.5 GiB", 1610612736), ("2tib", 2 * 2**40),
    ("50GB", 50 * 10**9), ("10MB", 10**7), ("20kB", 20_000), (" 1.5GB ", 1_500_000_000),
])
def test_it_reads_sizes(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "M", "-5M", "1e3", "5 X", "5 MBs", "1.2.3G", "GB5"])
def test_it_refuses_what_is_not_a_size(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_the_hub_and_the_client_read_sizes_alike():
    from storage.client import UsageError
    from storage.client.settings import user_size

    hub_config = pytest.importorskip("hub.config")
    assert hub_config.parse_size("50M") == user_size("50M") == 50 * 2**20
    with pytest.raises(hub_config.ConfigError):
        hub_config.parse_size("lots")
    with pytest.raises(UsageError) as err:
        user_size("lots")
    assert err.value.code == "BadSize"


def test_it_writes_sizes_in_decimal_units():
    assert format_size(49_200_000_000) == "49.2 GB"
    assert format_size(20_000) == "20 kB"
    assert format_size(512) == "512 B"
