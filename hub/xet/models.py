"""What the Xet door keeps: xorbs (chunks the clients uploaded, as they sent them, verified against
their hash) and Xet files (a file hash, the sha256 blob the hub rebuilt from its chunks, and the
xorbs it reads from). Every other door serves the blob; Xet clients download from the xorbs."""
from __future__ import annotations

import struct

from django.conf import settings
from django.db import models
from django.utils import timezone

# One chunk of a xorb's index: its hash, the end of its stored bytes (header + compressed data)
# within the xorb, its unpacked size.
INDEX_ENTRY = struct.Struct("<32sII")
XORB_PURPOSE = "xet xorb"  # what a xorb's quota reservation is for, until its shard arrives


def xorb_key(hash_hex: str) -> str:
    """Where a xorb lies in the object store."""
    return f"xorbs/{hash_hex[:2]}/{hash_hex}"


class Xorb(models.Model):
    """Up to 64 MiB of chunks, stored as the client sent them under their Merkle hash. The hub's own
    index (built while it verified them) says where each chunk lies and what it hashes to."""

    hash = models.CharField(max_length=64, primary_key=True)  # Xet's hex form
    size = models.BigIntegerField(help_text="stored bytes (chunk headers and compressed data)")
    unpacked = models.BigIntegerField(help_text="bytes of the chunks once decompressed")
    chunk_count = models.IntegerField()
    index = models.BinaryField()
    key = models.CharField(max_length=300)
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    # Last time a shard named it: it is kept HUB_XET_RETENTION after that (clients' shard caches
    # reuse xorbs they uploaded for weeks), then collected.
    touched = models.DateTimeField(default=timezone.now, db_index=True)
    # Write-behind (hub.xet.staging): a xorb is first kept on the disk of the server that received it
    # (`staged_on` names that server) and written to the store a little later, off the upload's path.
    in_store = models.BooleanField(default=True, db_index=True)
    staged_on = models.CharField(max_length=100, blank=True, default="")
    wanted = models.BooleanField(default=False, help_text="another server waits for it: write it now")

    def __str__(self) -> str:
        return f"xorb {self.hash[:12]} ({self.chunk_count} chunks, {self.size} B)"

    def chunks(self) -> list[tuple[bytes, int, int, int]]:
        """[(chunk hash, start, end, unpacked size)] in order; start/end are byte offsets in the xorb."""
        out, start = [], 0
        for h, end, size in INDEX_ENTRY.iter_unpack(bytes(self.index)):
            out.append((h, start, end, size))
            start = end
        return out


class XetFile(models.Model):
    """A file as Xet names it (the Merkle hash of its chunks), bound to the blob the hub rebuilt from
    those chunks and hashed itself. `terms` is the reconstruction: (xorb, first chunk, end chunk)."""

    hash = models.CharField(max_length=64, primary_key=True)
    blob = models.ForeignKey("content.Blob", on_delete=models.CASCADE, related_name="xet_files")
    size = models.BigIntegerField()
    terms = models.JSONField(help_text="[[xorb hash, first chunk, end chunk (exclusive)], …]")
    xorbs = models.ManyToManyField(Xorb, related_name="files")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"xet file {self.hash[:12]} = {self.blob_id[:12]}"


class XetChunk(models.Model):
    """Where a chunk the clients may ask the global dedup about lies: the first chunk of every Xet
    file and every chunk whose hash the client deems eligible (about one in 1,024). Recorded when a
    file is recorded, so only xorbs some verified file reads from are ever offered."""

    hash = models.CharField(max_length=64, db_index=True)  # Xet's hex form
    xorb = models.ForeignKey(Xorb, on_delete=models.CASCADE, related_name="dedup_chunks")
    index = models.IntegerField(help_text="the chunk's place in the xorb")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hash", "xorb"], name="xet_chunk_once_per_xorb")]

    def __str__(self) -> str:
        return f"chunk {self.hash[:12]} in {self.xorb_id[:12]}[{self.index}]"
