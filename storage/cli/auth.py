"""`hub login`, `hub logout`, `hub whoami`, `hub quota`: the account and its settings."""
from __future__ import annotations

import argparse
import getpass
import os
import sys
from datetime import UTC, datetime

from storage.cli.common import (
    EPILOG,
    _client,
)
from storage.client import (
    HubClient,
    NotFoundError,
    Settings,
    UsageError,
    load_credentials,
    save_credentials,
)
from storage.client.console import say
from storage.client.settings import resolve_endpoint
from storage.sizes import format_size


def cmd_login(args: argparse.Namespace) -> int:
    endpoint = resolve_endpoint(args.endpoint)
    token, source = args.token, "--token"
    if not token:
        source = "prompt" if sys.stdin.isatty() else "stdin"
        token = (getpass.getpass("token: ") if source == "prompt" else sys.stdin.readline()).strip()
    if not token:
        raise UsageError("no token given: pass --token, or type or pipe it in", code="NoToken")
    me = HubClient(settings=Settings(endpoint, token, source)).whoami()
    creds = load_credentials()
    creds["tokens"][endpoint] = token
    creds["endpoint"] = endpoint
    path = save_credentials(creds)
    say(f"logged in to {endpoint} as {me['name']} (token saved in {path})")
    for var in ("HUB_TOKEN", "HF_TOKEN"):
        if os.environ.get(var):
            say(f"note: {var} is set and takes precedence over the saved token")
            break
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    endpoint = resolve_endpoint(args.endpoint)
    creds = load_credentials()
    if creds["tokens"].pop(endpoint, None) is None:
        say(f"not logged in to {endpoint}")
        return 0
    save_credentials(creds)
    say(f"logged out of {endpoint}")
    return 0


def cmd_whoami(args: argparse.Namespace) -> int:
    client = _client(args)
    me = client.whoami()
    print(me["name"])
    orgs = [o["name"] for o in me.get("orgs") or []]
    if orgs:
        print(f"orgs: {', '.join(orgs)}")
    say(f"endpoint: {client.endpoint} (token from {client.settings.token_source})")
    return 0


def cmd_quota(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.abort:
        return _abort_uploads(client, args.namespace, args.abort)
    q = client.quota(args.namespace)
    limit, used, reserved = q["limit"], q["used"], q["reserved"]
    frac = (used + reserved) / limit if limit else 1.0
    width = 40
    filled = min(width, round(frac * width))
    print(f"{q['namespace']}: {format_size(used)} used of {format_size(limit)}, {format_size(reserved)} reserved "
          f"by uploads in progress, {format_size(q['available'])} available")
    print(f"[{'#' * filled}{'.' * (width - filled)}] {frac:6.1%}")
    for c in q.get("largest_consumers") or []:
        print(f"  {format_size(c['bytes']):>10}  {c['kind']} {c['id']}")
    held = q.get("reservations") or []
    if held:
        print(f"reserved ({format_size(reserved)}), largest first — an upload that was interrupted keeps its bytes "
              "reserved until it is resumed (run it again) or lapses; `hub quota --abort ID|all` gives them back now:")
        now = datetime.now(UTC)
        for r in held:
            expires = datetime.fromisoformat(r["expires"])
            left = (expires.replace(tzinfo=expires.tzinfo or UTC) - now).total_seconds()
            when = f"{max(1, round(left / 3600))} h" if left >= 5400 else f"{max(1, round(left / 60))} min"
            print(f"  {format_size(r['bytes']):>10}  {r['what']}" + (f"  upload {r['upload']}" if r["upload"] else "")
                  + f"  lapses in {when}" + (f"  (by {r['user']})" if r.get("user") and r["user"] != q["namespace"]
                                              else ""))
    return 0


def _abort_uploads(client: HubClient, namespace: str | None, which: list[str]) -> int:
    """Ends the upload sessions `hub quota` lists by id (or every one of the caller's: `all`): what
    they sent is deleted and the bytes they reserve are given back."""
    held: dict[str, list[dict]] = {}
    for r in client.quota(namespace).get("reservations") or []:
        if r["upload"]:
            held.setdefault(r["upload"], []).append(r)
    if which == ["all"]:
        me = client.whoami()["name"]
        ids = [upload for upload, rs in held.items() if rs[0].get("user") in (me, None)]
    else:
        ids = list(dict.fromkeys(which))
    freed, refused = 0, []
    for upload in ids:
        rs = held.get(upload)
        if rs is None:
            refused.append(f"{upload}: no upload of {namespace or 'your account'} holding a reservation has this id "
                           "(`hub quota` lists them)")
            continue
        try:
            client.abort_upload(upload, kind=rs[0]["kind"])
        except NotFoundError:
            refused.append(f"{upload}: not yours, or it has just ended")
            continue
        given = sum(r["bytes"] for r in rs)
        freed += given
        say(f"aborted the upload to {rs[0]['what']} ({format_size(given)})")
    if freed or not refused:
        say(f"gave back {format_size(freed)}" if freed else "nothing to give back")
    if refused:
        raise NotFoundError("; ".join(refused), code="NoSuchUpload")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("login", help="save a token for the hub", description="Checks a token against the hub "
                       "and saves it (readable by you only) for HUB_ENDPOINT or --endpoint.", epilog=EPILOG)
    p.add_argument("--token", help="the token (else typed at a prompt, or read from stdin)")
    p.add_argument("--endpoint", help="the hub's URL (default: HUB_ENDPOINT / HF_ENDPOINT / last login)")
    p.set_defaults(func=cmd_login)

    p = sub.add_parser("logout", help="forget the saved token", description="Forgets the token saved for the "
                       "endpoint.", epilog=EPILOG)
    p.add_argument("--endpoint", help="the hub's URL (default: HUB_ENDPOINT / HF_ENDPOINT / last login)")
    p.set_defaults(func=cmd_logout)

    p = sub.add_parser("whoami", help="show who the token belongs to", description="Prints the user the token "
                       "belongs to, and their organisations.", epilog=EPILOG)
    p.set_defaults(func=cmd_whoami)

    p = sub.add_parser("quota", help="storage used, reserved and allowed", description="Shows the account's "
                       "storage: used, reserved by uploads in progress (and which uploads hold it), limit, "
                       "and the largest consumers.",
                       epilog=EPILOG)
    p.add_argument("--namespace", help="an organisation you belong to (default: your account)")
    p.add_argument("--abort", nargs="+", metavar="ID", help="end these uploads in progress (ids as listed), or "
                   "`all` of yours: what they sent is deleted and the bytes they reserve are given back")
    p.set_defaults(func=cmd_quota)
