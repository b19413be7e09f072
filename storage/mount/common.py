"""What both kinds of mount share: the client's patience, hub errors as errno values (by
storage.client.errors.errno_of, as in the hub:// filesystem), log lines."""
from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from storage.client import (
    RETRY,
    AuthError,
    HubClient,
    HubClientError,
    RetryPolicy,
    UsageError,
    errno_of,
)

log = logging.getLogger("hub.mount")



def retry_policy(patience: float) -> RetryPolicy:
    """Tries spaced 0.5 s, 1 s, 2 s … 8 s apart (or as Retry-After says) until the waits add up to
    `patience` seconds."""
    attempts, waited = 1, 0.0
    while waited < patience:
        waited += min(8.0, 0.5 * 2 ** (attempts - 1))
        attempts += 1
    return RetryPolicy(attempts=attempts, base=0.5, cap=8.0, budget=patience)


def _patience() -> float:
    try:
        return max(0.0, float(os.environ.get("HUB_MOUNT_RETRY_SECONDS", "30")))
    except ValueError:
        raise UsageError(f"HUB_MOUNT_RETRY_SECONDS must be a number of seconds, not "
                         f"{os.environ['HUB_MOUNT_RETRY_SECONDS']!r}", code="BadSetting") from None


# A hub restart takes seconds: keep retrying for half a minute (HUB_MOUNT_RETRY_SECONDS), then fail
# the call with EIO. Connect and read timeouts bound each try, so nothing waits forever.
MOUNT_RETRY = retry_policy(_patience())


class MountClient(HubClient):
    """The hub client with the mount's retry policy for every call that uses the default one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("connect_timeout", 5.0)
        kwargs.setdefault("read_timeout", 60.0)
        super().__init__(*args, **kwargs)

    def request(self, method: str, url: str, *, retry: RetryPolicy = RETRY, **kwargs: Any):
        return super().request(method, url, retry=MOUNT_RETRY if retry is RETRY else retry, **kwargs)


# Expected answers to ordinary calls (a lookup of a name that is not there...): not worth a log line.
QUIET = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR}


class ErrorLog:
    """One line per error, but the same line at most once per `every` seconds (a training job
    that retries in a loop must not fill the disk with the same sentence)."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self.last: dict[str, tuple[float, int]] = {}
        self.lock = threading.Lock()
        self.auth_reported = False

    def error(self, message: str) -> None:
        now = time.monotonic()
        with self.lock:
            when, hidden = self.last.get(message, (0.0, 0))
            if now - when < self.every:
                self.last[message] = (when, hidden + 1)
                return
            self.last[message] = (now, 0)
        log.error(message + (f" (and {hidden} more times)" if hidden else ""))

    def hub_error(self, op: str, path: str, err: HubClientError, code: int) -> None:
        if code in QUIET:
            return
        if isinstance(err, AuthError):
            self.error(f"the hub rejected the token ({err.message}); has it been revoked? every call now fails "
                       "with EACCES until the mount is restarted with a valid token")
            return
        self.error(f"{op} {path}: {err.message} ({errno.errorcode.get(code, code)})")


def fuse_op(fn: Callable) -> Callable:
    """Turns what an operation raises into the errno FUSE returns: hub errors by errno_of (logged
    once), OSError as is, anything else EIO with a traceback in the log."""
    from mfusepy import FuseOSError

    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self, *args):
        try:
            return fn(self, *args)
        except HubClientError as err:
            code = errno_of(err)
            self.errors.hub_error(name, args[0] if args else "", err, code)
            raise FuseOSError(code) from None
        except OSError:
            raise
        except ValueError as err:  # a malformed hash or path from the hub: refuse rather than guess
            self.errors.error(f"{name} {args[0] if args else ''}: {err} (EIO)")
            raise FuseOSError(errno.EIO) from None
        except Exception:
            log.exception("%s %s failed", name, args[0] if args else "")
            raise FuseOSError(errno.EIO) from None

    return wrapper


def configure_logging(log_file: str | None, verbose: bool = False) -> None:
    """Log lines to `log_file` (appended), else to stderr."""
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s hub-mount[%(process)d] %(levelname)s %(message)s"))
    root = logging.getLogger("hub.mount")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    fuse_log = logging.getLogger("fuse")  # mfusepy's own messages
    fuse_log.handlers[:] = [handler]
    fuse_log.setLevel(logging.WARNING)
    fuse_log.propagate = False


def invalidate_kernel_cache(path: str) -> None:
    """Tells the kernel to forget the attributes and cached pages of `path` (call from inside an
    operation): the next read asks for the size again instead of trusting what it saw before."""
    import mfusepy

    lib = mfusepy._libfuse
    fn = getattr(lib, "fuse_invalidate_path", None)
    if fn is None:
        return
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    fn.restype = ctypes.c_int
    fuse = lib.fuse_get_context().contents.fuse
    if fuse:
        fn(ctypes.c_void_p(fuse), path.encode("utf-8", "surrogateescape"))



class _Buf(ctypes.Structure):  # struct fuse_buf (fuse_common.h)
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_int), ("mem", ctypes.c_void_p),
                ("fd", ctypes.c_int), ("pos", ctypes.c_int64)]


class _BufVec(ctypes.Structure):  # struct fuse_bufvec, with its one buffer inline
    _fields_ = [("count", ctypes.c_size_t), ("idx", ctypes.c_size_t), ("off", ctypes.c_size_t),
                ("buf", _Buf * 1)]


_libc = ctypes.CDLL(None)
_libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.calloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.malloc.restype = ctypes.c_void_p


def malloc(n: int) -> int:
    """Memory libfuse may free(): for the bytes of a read_buf answer (reply_with_memory)."""
    ptr = _libc.malloc(n)
    if not ptr:
        raise MemoryError("malloc failed")
    return ptr
FUSE_BUF_IS_FD, FUSE_BUF_FD_SEEK, FUSE_BUF_FD_RETRY = 1 << 1, 1 << 2, 1 << 3
FUSE_CAP_SPLICE_WRITE, FUSE_CAP_SPLICE_MOVE = 1 << 7, 1 << 8
FUSE_CAP_READDIRPLUS_AUTO = 1 << 14  # fuse_common.h (libfuse 3)
# The kernel's read-ahead on a repo mount (not its default 128 KiB): reads come in requests of up to
# 1 MiB, fewer and larger calls into Python (storage.mount.commands raises the bdi's; INIT's
# max_readahead caps it, so repo mounts ask for as much there).
READAHEAD = 4 << 20


def _vector(bufpp):
    ptr = _libc.calloc(1, 256)  # room for fields later libfuse versions add at the end
    if not ptr:
        raise MemoryError("calloc failed")
    ctypes.cast(bufpp, ctypes.POINTER(ctypes.c_void_p))[0] = ptr
    vec = _BufVec.from_address(ptr)
    vec.count = 1
    return vec.buf[0]


def reply_with_memory(bufpp, addr: int, size: int) -> int:
    """Answers a read_buf with `size` bytes at `addr`, memory from malloc() that libfuse frees."""
    b = _vector(bufpp)
    b.size, b.flags, b.mem = size, 0, addr
    return 0


def reply_with_fd(bufpp, fd: int, offset: int, size: int) -> int:
    """Answers a read_buf with `size` bytes of `fd` at `offset`, for libfuse to copy (or splice)
    to the kernel itself: the bytes never pass through Python. The vector is calloc'd, as libfuse
    frees it. (mfusepy's fuse_bufvec declares `buf` as a pointer; in fuse_common.h it is an array.)"""
    b = _vector(bufpp)
    b.size, b.flags, b.fd, b.pos = max(0, size), FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY, fd, offset
    return 0
