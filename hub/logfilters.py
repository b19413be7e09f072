"""Logging filters named in settings.LOGGING. (No Django imports: loaded while logging is set up.)"""
from __future__ import annotations

import logging
import re

# CAS routes where 404 is the protocol's "no", answered to every upload: the global dedup query
# about a chunk no file holds, and hf_xet's probe for xorb upload grants (not offered here: the
# client then POSTs the xorb to the hub).
_EXPECTED_404 = re.compile(r"^/cas/v1/(?:chunks|xorb-grants)/")


class ExpectedNotFound(logging.Filter):
    """Drops django.request's "Not Found" warning for those answers; every other 404 is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        return not (getattr(record, "status_code", None) == 404
                    and _EXPECTED_404.match(getattr(request, "path", "") or ""))
