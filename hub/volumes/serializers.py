"""Shapes of the volume API: input validation and the OpenAPI schema."""
from __future__ import annotations

from rest_framework import serializers

from hub.errors import BadRequest
from hub.volumes.models import VolumeEntry
from hub.volumes.uploads import MAX_SIZE


def path_field(**kwargs) -> serializers.CharField:
    return serializers.CharField(trim_whitespace=False, max_length=4096, **kwargs)


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="what went wrong, in a sentence a person can act on")
    code = serializers.CharField(help_text="machine-readable: EntryNotFound, FileExists, NotADirectory, "
                                           "IsADirectory, DirectoryNotEmpty, PreconditionFailed, "
                                           "QuotaExceeded, InvalidPath, BadRequest, …")


class EntrySerializer(serializers.Serializer):
    path = serializers.CharField()
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=["file", "directory"])
    size = serializers.IntegerField(help_text="bytes; 0 for directories")
    mtime = serializers.DateTimeField()
    etag = serializers.CharField(allow_null=True, help_text="sha256 of a file's bytes; null for directories")


class ListingSerializer(serializers.Serializer):
    path = serializers.CharField()
    items = EntrySerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as `cursor` for the next page")


class MkdirSerializer(serializers.Serializer):
    path = path_field()
    parents = serializers.BooleanField(default=False, help_text="create missing parents; an existing "
                                                                "directory is fine (mkdir -p)")


class MoveSerializer(serializers.Serializer):
    src = path_field()
    dst = path_field()
    overwrite = serializers.BooleanField(default=False, help_text="replace a file, or an empty directory")
    parents = serializers.BooleanField(default=False, help_text="create missing parents of dst")


class UploadCreateSerializer(serializers.Serializer):
    path = path_field()
    size = serializers.IntegerField(min_value=0, max_value=MAX_SIZE)
    sha256 = serializers.CharField(min_length=64, max_length=64, required=False, allow_null=True, default=None,
                                   help_text="the file's sha256. Known up front, it lets the hub resume your "
                                             "open session or skip bytes you already stored; otherwise give it "
                                             "at completion and hash while the parts upload")
    part_size = serializers.IntegerField(required=False, allow_null=True, default=None,
                                         help_text="bytes per part (all but the last); the hub chooses if unset")
    if_match = serializers.CharField(required=False, allow_null=True, default=None,
                                     help_text="complete only if the file still has this ETag ('*': exists)")
    if_none_match = serializers.BooleanField(default=False, help_text="complete only if the path is still free")
    checked = serializers.BooleanField(default=False, help_text=(
        "checked parts (S3 stores): `parts` stays empty; ask POST …/parts with each part's sha256 for URLs "
        "the store checks those bytes against (send the header x-amz-content-sha256). The hub then completes "
        "without reading the file back, and verifies its whole sha256 in the background"))


class CheckedPartsSerializer(serializers.Serializer):
    parts = serializers.DictField(child=serializers.CharField(min_length=64, max_length=64), allow_empty=False,
                                  help_text="part number → sha256 of that part's bytes (at most 1000)")


class CheckedPartUrlsSerializer(serializers.Serializer):
    parts = serializers.DictField(child=serializers.URLField(), help_text=(
        "part number → URL to PUT that part's bytes to, with the header x-amz-content-sha256: <its sha256>"))


class UploadCompleteSerializer(serializers.Serializer):
    sha256 = serializers.CharField(min_length=64, max_length=64, required=False, allow_null=True, default=None,
                                   help_text="optional: the hub hashes the stored bytes itself; a sha256 "
                                             "given here (or at the start) must match them")


class UploadSerializer(serializers.Serializer):
    id = serializers.UUIDField(allow_null=True, help_text="null when the bytes were already stored and "
                                                          "the file was written at once")
    status = serializers.ChoiceField(choices=["open", "done"])
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    part_size = serializers.IntegerField(allow_null=True)
    part_count = serializers.IntegerField(allow_null=True)
    received = serializers.ListField(child=serializers.IntegerField(),
                                     help_text="part numbers the store already holds")
    parts = serializers.DictField(child=serializers.URLField(),
                                  help_text="part number → URL to PUT that part's bytes to, without "
                                            "credentials; only for parts still missing; fresh on every call")
    expires = serializers.DateTimeField(allow_null=True)
    checked = serializers.BooleanField(help_text="parts go only to URLs from POST …/parts (see the start)")
    entry = EntrySerializer(allow_null=True)


def entry_data(entry: VolumeEntry, path: str) -> dict:
    return {"path": path, "name": path.rsplit("/", 1)[-1], "type": "directory" if entry.is_dir else "file",
            "size": entry.size, "mtime": entry.mtime, "etag": entry.blob_id}


def validated(serializer_class: type[serializers.Serializer], data) -> dict:
    """The validated data, or BadRequest naming every bad field."""
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    ser = serializer_class(data=data)
    if not ser.is_valid():
        raise BadRequest(f"invalid request: {'; '.join(_problems(ser.errors))}")
    return ser.validated_data


def _problems(errors, where: str = "") -> list[str]:
    """DRF's nested error structure as 'field: message' lines ('mounts[0].type: ...')."""
    if isinstance(errors, dict):
        return [p for field, sub in errors.items() for p in _problems(sub, f"{where}.{field}" if where else field)]
    if isinstance(errors, list) and any(isinstance(e, (dict, list)) for e in errors):
        return [p for i, sub in enumerate(errors) if sub for p in _problems(sub, f"{where}[{i}]")]
    return [f"{where}: {' '.join(str(m) for m in errors)}"]
