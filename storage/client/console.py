"""The one top-level handler of the client's commands (`hub`, `python -m storage.mount`): known
errors become one `error: ...` line on stderr, everything else a line and a hint to set HUB_DEBUG=1
for the traceback. Data goes to stdout, everything else to stderr."""
from __future__ import annotations

import argparse
import errno
import os
import sys
import traceback

from storage.client.errors import HubClientError, UsageError


def say(msg: str) -> None:
    """A line for the person at the terminal, on stderr (stdout is for data)."""
    print(msg, file=sys.stderr, flush=True)


def dispatch(parser: argparse.ArgumentParser, argv: list[str] | None = None, *,
             interrupted: str | None = "interrupted: run the same command again to continue") -> int:
    """Runs the chosen subcommand under the conventions of every `hub` command: one `error: ...`
    line on stderr, status 1 (2 for usage errors, 130 for Ctrl-C), HUB_DEBUG=1 for a traceback."""
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    debug = os.environ.get("HUB_DEBUG", "") not in ("", "0")
    try:
        return args.func(args)
    except UsageError as err:
        if debug:
            traceback.print_exc()
        say(f"error: {err.message}")
        return 2
    except HubClientError as err:
        if debug:
            traceback.print_exc()
        say(f"error: {err.message}")
        return 1
    except KeyboardInterrupt:
        if interrupted:
            say(interrupted)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as err:  # noqa: BLE001 - the one top-level handler
        if debug:
            traceback.print_exc()
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" (writing {err.filename})" if err.filename else ""
            say(f"error: no space left on the disk{where}: free some space (or write elsewhere), then run the "
                "same command again; it continues from what is already on disk")
        else:
            say(f"error: {type(err).__name__}: {err} (set HUB_DEBUG=1 for a traceback)")
        return 1
