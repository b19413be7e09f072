"""The hub's object store as the tests look into it: the S3 bucket of a hub on S3, the local
objects directory of an embedded one."""
from __future__ import annotations

from urllib.parse import urlparse


def s3_client(hub):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=hub.env["AWS_ENDPOINT_URL"],
        aws_access_key_id=hub.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=hub.env["AWS_SECRET_ACCESS_KEY"],
        region_name=hub.env.get("AWS_DEFAULT_REGION", "us-east-1"),
    )


def stored_objects(hub, under: str = "blobs/") -> dict[str, int]:
    """{key: size} of every object of the hub's store under `under` (the bucket or the local dir)."""
    url = hub.env.get("HUB_STORAGE_URL")
    if not url:
        root = hub.data_dir / "objects"
        return {
            p.relative_to(root).as_posix(): p.stat().st_size for p in (root / under).rglob("*") if p.is_file()
        }
    parsed = urlparse(url)
    prefix = parsed.path.strip("/") + "/" if parsed.path.strip("/") else ""
    out = {}
    for page in (
        s3_client(hub).get_paginator("list_objects_v2").paginate(Bucket=parsed.netloc, Prefix=prefix + under)
    ):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(prefix) :]] = obj["Size"]
    return out
