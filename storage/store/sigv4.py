"""Presigned S3 URLs (AWS Signature Version 4, query-string form) for many keys in one go: GETs, and
PUTs that the store itself checks against a sha256 the URL was signed with.

botocore's generate_presigned_url costs ~170 µs a URL (event hooks, endpoint resolution); a manifest
page of thousands of files needs them in milliseconds. The signing key is derived once per batch and
each URL then costs one SHA-256 and one HMAC. Path-style addressing only (what the hub configures
for MinIO and Ceph RGW); the caller falls back to botocore for anything else."""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _q(value: str) -> str:
    return quote(value, safe="-_.~")


def presign_get_urls(endpoint_url: str, bucket: str, keys: list[str], *, access_key: str, secret_key: str,
                     region: str, expires: int, session_token: str | None = None,
                     now: dt.datetime | None = None) -> list[str]:
    """URLs that let their holder GET `bucket/key` for `expires` seconds, in the order of `keys`."""
    return presign_urls("GET", endpoint_url, bucket, [(k, None) for k in keys], access_key=access_key,
                        secret_key=secret_key, region=region, expires=expires, session_token=session_token, now=now)


def presign_urls(method: str, endpoint_url: str, bucket: str, items: list[tuple[str, str | None]], *,
                 access_key: str, secret_key: str, region: str, expires: int, session_token: str | None = None,
                 now: dt.datetime | None = None, params: list[dict[str, str]] | None = None) -> list[str]:
    """URLs that let their holder send `method` to `bucket/key` for `expires` seconds, one per
    (key, sha256) item, in order (with `params`, each item's own query parameters too, such as a
    part's partNumber and uploadId). With a sha256 the URL signs the header `x-amz-content-sha256`
    with that value: the request must carry it (else the signature fails, 403), and the store
    refuses a body that does not hash to it (400 XAmzContentSHA256Mismatch, nothing stored). So a
    PUT URL signed this way can only ever store those exact bytes, however often it is used."""
    parts = urlsplit(endpoint_url)
    host = parts.netloc
    if (parts.scheme == "http" and host.endswith(":80")) or (parts.scheme == "https" and host.endswith(":443")):
        host = host.rsplit(":", 1)[0]
    base_path = parts.path.rstrip("/")
    now = now or dt.datetime.now(dt.UTC)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    scope = f"{day}/{region}/s3/aws4_request"
    signing_key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), day), region), "s3"), "aws4_request")
    head = f"{ALGORITHM}\n{amz_date}\n{scope}\n"
    prefix = f"{parts.scheme}://{parts.netloc}"
    queries: dict[bool, str] = {}
    urls = []
    for i, (key, sha256) in enumerate(items):
        signed = "host;x-amz-content-sha256" if sha256 else "host"
        query = queries.get(bool(sha256))
        if query is None:
            common = {
                "X-Amz-Algorithm": ALGORITHM,
                "X-Amz-Credential": f"{access_key}/{scope}",
                "X-Amz-Date": amz_date,
                "X-Amz-Expires": str(expires),
                "X-Amz-SignedHeaders": signed,
            }
            if session_token:
                common["X-Amz-Security-Token"] = session_token
            query = queries[bool(sha256)] = "&".join(f"{_q(k)}={_q(v)}" for k, v in sorted(common.items()))
        if params and params[i]:  # (the item's own parameters, sorted in with the signature's)
            query = "&".join(sorted([*query.split("&"), *(f"{_q(k)}={_q(v)}" for k, v in params[i].items())]))
        headers = f"host:{host}\n" + (f"x-amz-content-sha256:{sha256}\n" if sha256 else "")
        path = f"{base_path}/{quote(bucket, safe='')}/{quote(key, safe='/~')}"
        canonical = f"{method}\n{path}\n{query}\n{headers}\n{signed}\n{sha256 or 'UNSIGNED-PAYLOAD'}"
        string_to_sign = head + hashlib.sha256(canonical.encode()).hexdigest()
        signature = hmac.new(signing_key, string_to_sign.encode(), hashlib.sha256).hexdigest()
        urls.append(f"{prefix}{path}?{query}&X-Amz-Signature={signature}")
    return urls
