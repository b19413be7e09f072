"""Hub errors become the same errno in the hub:// filesystem and in a mount (one table)."""
from __future__ import annotations

import errno

import pytest

from storage.client import (
    AuthError,
    ConflictError,
    HubClientError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    TransportError,
    UsageError,
    errno_of,
)
from storage.fs.hubfs import _os_error


@pytest.mark.parametrize("err, number", [
    (ConflictError("x", code="FileExists", status=409), errno.EEXIST),
    (ConflictError("x", code="DirectoryNotEmpty", status=409), errno.ENOTEMPTY),
    (HubClientError("x", code="NotADirectory", status=400), errno.ENOTDIR),
    (HubClientError("x", code="IsADirectory", status=400), errno.EISDIR),
    (HubClientError("x", code="InvalidPath", status=400), errno.EINVAL),
    (HubClientError("x", code="PreconditionFailed", status=412), errno.EEXIST),
    (QuotaExceededError("x", code="QuotaExceeded", status=413), errno.EDQUOT),
    (NotFoundError("x", code="EntryNotFound", status=404), errno.ENOENT),
    (AuthError("x", code="Unauthorized", status=401), errno.EACCES),
    (PermissionDeniedError("x", code="Forbidden", status=403), errno.EACCES),
    (ConflictError("x", code="HTTP409", status=409), errno.EEXIST),
    (HubClientError("x", code="HTTP400", status=400), errno.EINVAL),
    (TransportError("x", code="ConnectionError"), errno.EIO),
])
def test_it_maps_hub_errors_to_one_errno_for_hubfs_and_the_mount(err, number):
    assert errno_of(err) == number
    oserr = _os_error(err, "volume/x")
    assert isinstance(oserr, OSError) and oserr.errno == number and oserr.filename == "volume/x"


def test_hubfs_raises_the_builtin_subclasses():
    assert isinstance(_os_error(NotFoundError("x", code="EntryNotFound"), "p"), FileNotFoundError)
    assert isinstance(_os_error(AuthError("x"), "p"), PermissionError)
    assert isinstance(_os_error(HubClientError("x", code="PreconditionFailed", status=412), "p"), FileExistsError)
    assert isinstance(_os_error(UsageError("bad"), "p"), ValueError)
