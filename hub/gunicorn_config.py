"""gunicorn settings shared by scripts/run.sh and docker-compose.yml (`gunicorn hub.wsgi -c
python:hub.gunicorn_config --bind ... --workers N`): the worker model, and an access log on stdout
with the capability URLs redacted — the signed path of an LFS upload, part, completion or download
(/lfs/upload/<token>, ...) and the `sig` of a volume part URL open what they name to whoever holds
them, so they must not end up in log files and the systems logs are shipped to."""
from __future__ import annotations

import re

from gunicorn.glogging import Logger

worker_class = "gthread"
threads = 8
timeout = 300
# Clients keep connections open between requests; gunicorn's default of 2 s closes them under a
# client about to reuse one ("connection reset by peer").
keepalive = 30
accesslog = "-"

_CAPABILITIES = [
    # (a path that begins with /lfs/: not a repo's /NS/NAME.git/info/lfs/objects/batch)
    (re.compile(r"((?:^|[\s\"]|://[^/\s\"]*)/lfs/(?:upload|part|complete|objects)/)[^/?#\s\"]+"), r"\1[redacted]"),
    (re.compile(r"([?&]sig=)[^&#\s\"]+"), r"\1[redacted]"),
]


def redact(text: str) -> str:
    for pattern, repl in _CAPABILITIES:
        text = pattern.sub(repl, text)
    return text


class RedactingLogger(Logger):
    """gunicorn's logger, with capability tokens cut out of every access-log field that carries a URL
    (the request line, path, query and referer)."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for key in ("r", "U", "q", "f", "{referer}i"):
            if isinstance(atoms.get(key), str):
                atoms[key] = redact(atoms[key])
        return atoms


logger_class = RedactingLogger
