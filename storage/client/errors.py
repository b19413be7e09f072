"""The client's errors: every failure is a HubClientError whose message is one sentence a person can
act on, with the server's error code and the HTTP status when there was one; and the one table of
the errno each becomes in a filesystem (the `hub://` filesystem and the mounts alike)."""
from __future__ import annotations

import errno


class HubClientError(Exception):
    """A failure with a one-line message for a person. `code` is the server's X-Error-Code (or a
    client-side code such as ConnectionError), `status` the HTTP status if there was one."""

    def __init__(self, message: str, *, code: str = "Error", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


class NotFoundError(HubClientError):
    pass


class AuthError(HubClientError):
    pass


class PermissionDeniedError(HubClientError):
    pass


class QuotaExceededError(HubClientError):
    pass


class ConflictError(HubClientError):
    pass


class TransportError(HubClientError):
    """The hub or the store could not be reached, or kept failing after the retries."""


class IntegrityError(HubClientError):
    """Bytes received do not match the sha256 or size the hub announced."""


RUN_AGAIN = "run the command again once nothing is writing to it"  # (after "FILE changed while ...")


def file_changed(path, how: str = "changed") -> IntegrityError:
    """A local file written to while it was being uploaded (code FileChanged): what happened, what to do."""
    return IntegrityError(f"{path} {how} while it was being uploaded: {RUN_AGAIN}", code="FileChanged")


class UsageError(HubClientError):
    """Bad input on the client side (a malformed repo id, a missing endpoint...)."""


_BY_STATUS: dict[int, type[HubClientError]] = {401: AuthError, 403: PermissionDeniedError, 404: NotFoundError,
                                               409: ConflictError, 413: QuotaExceededError}


# The server's error codes that say more than their HTTP status. Precondition failures come from
# If-None-Match: * (create only if absent), so they mean "it exists".
_ERRNO_BY_CODE = {"FileExists": errno.EEXIST, "NotADirectory": errno.ENOTDIR, "IsADirectory": errno.EISDIR,
                  "DirectoryNotEmpty": errno.ENOTEMPTY, "InvalidPath": errno.EINVAL,
                  "PreconditionFailed": errno.EEXIST, "QuotaExceeded": errno.EDQUOT}


def errno_of(err: HubClientError) -> int:
    """The errno a hub error becomes in a filesystem: by the server's code when it is one of
    _ERRNO_BY_CODE, else by kind (quota EDQUOT, missing ENOENT, refused EACCES, conflict EEXIST,
    bad input EINVAL); anything else, including a hub or store that cannot be reached, EIO."""
    if err.code in _ERRNO_BY_CODE:
        return _ERRNO_BY_CODE[err.code]
    if isinstance(err, QuotaExceededError) or err.status == 413:
        return errno.EDQUOT
    if isinstance(err, NotFoundError):
        return errno.ENOENT
    if isinstance(err, AuthError | PermissionDeniedError):
        return errno.EACCES
    if isinstance(err, ConflictError):
        return errno.EEXIST
    if isinstance(err, UsageError) or err.status == 400:
        return errno.EINVAL
    return errno.EIO
