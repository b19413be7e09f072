"""Directory listings that carry every entry's attributes to the kernel (READDIRPLUS).

Without them, `ls -l`, `find` or `du` on a mount costs one LOOKUP round trip into Python per entry
after the listing, and each waits for the interpreter while the prefetch threads hold it. libfuse 3
asks a filesystem's readdir for full attributes when the kernel sends READDIRPLUS, but mfusepy hands
libfuse names with their file type only, and libfuse 3.14 drops the attributes of a listing it keeps
whole (no offsets) in any case: only entries given with offsets reach the kernel with theirs
(lib/fuse.c: fill_dir_plus, readdir_fill_from_list).

So an operations object that offers `listing(path, fh, offset)` — the entries of the directory
from the offset-th on, as (name as bytes, attributes as getattr gives them), "." and ".." first, in
the same order for every call on one directory — is answered here with offsets and
FUSE_FILL_DIR_PLUS. Imported only by the mount process (it loads libfuse).
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import mfusepy

FUSE_READDIR_PLUS = 1 << 0  # fuse.h, enum fuse_readdir_flags
FUSE_FILL_DIR_PLUS = 1 << 1  # fuse.h, enum fuse_fill_dir_flags


class HubFUSE(mfusepy.FUSE):
    """mfusepy.FUSE, with the listings of operations that offer `listing` sent with attributes."""

    def readdir_fuse_3(self, path: bytes | None, buf, filler, offset: int, fip, flags: int) -> int:
        listing = getattr(self.operations, "listing", None)
        if listing is None:
            return super().readdir_fuse_3(path, buf, filler, offset, fip, flags)
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        entries: Iterator[tuple[bytes, dict[str, Any]]] = listing(decoded, fip.contents.fh if fip else 0, offset)
        plus = FUSE_FILL_DIR_PLUS if flags & FUSE_READDIR_PLUS else 0
        use_ns = getattr(self.operations, "use_ns", False)
        st = mfusepy.c_stat()
        size = ctypes.sizeof(st)
        for i, (name, attrs) in enumerate(entries, offset):
            ctypes.memset(ctypes.byref(st), 0, size)
            mfusepy.set_st_attrs(st, attrs, use_ns)
            if filler(buf, name, st, i + 1, plus):  # the kernel's buffer is full: it asks again from i + 1
                break
        return 0
