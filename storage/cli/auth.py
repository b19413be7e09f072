"""`hub login`, `hub logout`, `hub whoami`, `hub quota`: the account and its settings."""
from __future__ import annotations

import argparse
import getpass
import os
import sys

from storage.cli.common import (
    EPILOG,
    _client,
)
from storage.client import (
    HubClient,
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
    q = _client(args).quota(args.namespace)
    limit, used, reserved = q["limit"], q["used"], q["reserved"]
    frac = (used + reserved) / limit if limit else 1.0
    width = 40
    filled = min(width, round(frac * width))
    print(f"{q['namespace']}: {format_size(used)} used of {format_size(limit)}, {format_size(reserved)} reserved "
          f"by uploads in progress, {format_size(q['available'])} available")
    print(f"[{'#' * filled}{'.' * (width - filled)}] {frac:6.1%}")
    for c in q.get("largest_consumers") or []:
        print(f"  {format_size(c['bytes']):>10}  {c['kind']} {c['id']}")
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
                       "storage: used, reserved by uploads in progress, limit, and the largest consumers.",
                       epilog=EPILOG)
    p.add_argument("--namespace", help="an organisation you belong to (default: your account)")
    p.set_defaults(func=cmd_quota)
