import logging
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
application = get_wsgi_application()


def _warm_up() -> None:
    """What every worker would otherwise do on its first requests, done at its start: import the
    views behind every URL and build the object store's client (boto3 loads and parses its service
    model, ~0.25 s of CPU). No network: a store that is down still lets the server start."""
    from django.urls import get_resolver

    from hub.content import blobs
    from hub.xet import staging

    get_resolver().url_patterns  # noqa: B018 — imports the URL conf and every view module
    try:
        blobs.object_store()
    except Exception:  # noqa: BLE001 — a bad storage URL: the requests that need it say so, as before
        logging.getLogger("hub").exception("cannot set up the object store client")
    staging.resume()  # xorbs an earlier process of this server staged and did not write yet


_warm_up()
