"""A `manage.py` that is already set up: run with a hub's environment, it imports Django, the hub's
apps and what the commands' checks import, once; then for each request on stdin it forks a child that
runs `manage.py ARGS…` as a new process would (its own database connections, caches and object-store
client; its output to the files named; its exit code the child's). A test pays the ~0.8 s of start-up
once per hub instead of once per command. Used by `Hub.manage` for the commands tests run by the
hundred (tests/support/servers.py: FORKED_COMMANDS).

Protocol, one JSON line each way: {"argv": [...], "out": path, "err": path} →
{"pid": child pid}, then {"code": exit code}."""
import atexit
import gc
import json
import os
import sys
import threading
import traceback
from typing import NoReturn

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")  # (as manage.py does)
django.setup()

from django.core import checks  # noqa: E402
from django.core.management import execute_from_command_line  # noqa: E402
from django.core.management.commands import shell  # noqa: E402,F401

from hub.quotas.management.commands import hub_token  # noqa: E402,F401


def run(argv: list[str]) -> NoReturn:
    """Runs the command, then ends the process as the interpreter's exit would (SystemExit's code or
    message, a traceback for an error, non-daemon threads joined, atexit functions run, output
    flushed) but without freeing every object of the set-up one by one, which takes ~0.4 s."""
    try:
        execute_from_command_line(argv)
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports an uncaught one
        traceback.print_exc()
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve() -> None:
    checks.run_checks()  # (imports the URLconf and the views that every command's checks look at)
    if threading.active_count() != 1:  # a fork would copy locks that another thread may hold
        sys.exit("manage_fork: a thread started during the set-up; run each command in a process of its own")
    gc.freeze()  # what the set-up made stays out of the children's collections (no copy-on-write)
    channel_out = os.fdopen(os.dup(1), "w")
    for line in sys.stdin.buffer:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            os.dup2(os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            channel_out.close()
            sys.stdin = open(os.devnull)  # noqa: SIM115 - the child's stdin until it exits
            run(["manage.py", *request["argv"]])
        channel_out.write(json.dumps({"pid": pid}) + "\n")
        channel_out.flush()
        _, status = os.waitpid(pid, 0)
        channel_out.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        channel_out.flush()


if __name__ == "__main__":
    serve()
