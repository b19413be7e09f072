"""Settings, all from the environment; defaults give the embedded engines (SQLite, a local object
directory, in-process Celery tasks) so a checkout just runs."""
from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url

from hub.config import ConfigError, env, envbool, envint, envsize

BASE_DIR = Path(__file__).resolve().parent.parent
HUB_DATA_DIR = Path(env("HUB_DATA_DIR") or BASE_DIR / ".hub-data").resolve()
HUB_DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    value = env("SECRET_KEY") or env("DJANGO_SECRET_KEY")
    if value:
        return value
    # The embedded default keeps a generated key next to its data, so tokens and signed URLs survive
    # restarts; every replica of a scaled-out hub must share SECRET_KEY instead.
    path = HUB_DATA_DIR / "secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Earlier keys, comma-separated, while SECRET_KEY rotates: what they signed or sealed still opens.
SECRET_KEY_FALLBACKS = [k.strip() for k in (env("SECRET_KEY_FALLBACKS") or "").split(",") if k.strip()]
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in (env("ALLOWED_HOSTS") or "*").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o for o in (env("CSRF_TRUSTED_ORIGINS") or "").split(",") if o]
USE_X_FORWARDED_HOST = envbool("USE_X_FORWARDED_HOST", False)
if envbool("HUB_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_ratelimit",
    "hub.accounts",
    "hub.content",
    "hub.repos",
    "hub.quotas",
    "hub.xet",
    "hub.volumes",
    "hub.instances",
    "hub.catalog",
    "hub.mirrors",
    "hub.discussions",
    "hub.viewer",
    "hub.hfapi",
    "hub.web",
]

MIDDLEWARE = [
    "hub.requestid.RequestIdMiddleware",  # first: every response has one, errors and static files too
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's LocaleMiddleware, reading the language kept in the session too (hub.web.language)
    "hub.web.language.LanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Before CSRF: a bearer token sent to a web form is refused as such, not as a CSRF failure.
    "hub.accounts.middleware.TokenAuthMiddleware",
    "hub.instances.middleware.InstanceScopeMiddleware",  # (an instance's token: revoked? its routes, its repos)
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "hub.errors.HubErrorMiddleware",
]

# Content-Security-Policy on every response (django-csp): scripts only from the hub's own files (no
# inline script, no eval, no javascript: URLs), no plugins, never framed. Inline style attributes
# stay allowed; README cards may show images from https sites.
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:", "https:"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}}

ROOT_URLCONF = "hub.urls"
WSGI_APPLICATION = "hub.wsgi.application"
APPEND_SLASH = False  # a 301 on a POST from huggingface_hub would lose the body

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "hub.web.pages.form_kept",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL") or f"sqlite:///{HUB_DATA_DIR / 'hub.sqlite3'}",
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets readers run beside the one writer; the busy timeout makes concurrent writers wait
    # for the lock instead of failing at once. Connections are kept (CONN_MAX_AGE, as on PostgreSQL):
    # a new one per request cost ~1 ms to open and started with an empty page cache, so every
    # request read its index pages again (3 ms of a 5.6 ms catalog page).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login"
LOGIN_REDIRECT_URL = "/settings"
LOGOUT_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# The web pages in English and Simplified Chinese (locale/zh_Hans, compiled .mo committed beside its
# .po: tests/test_i18n.py keeps them complete and in step); the API speaks English whatever is asked.
USE_I18N = True
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "static/"
# Serve app static files (the web pages' stylesheet) straight from the apps, so no collectstatic step is
# needed before a server (or a test server) starts.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT = HUB_DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)

# Inline (base64) commit payloads can be large; the commit view reads the NDJSON stream itself and
# paths-info may carry hundreds of paths.
DATA_UPLOAD_MAX_MEMORY_SIZE = envsize("HUB_MAX_REQUEST_BODY", "512MiB")
DATA_UPLOAD_MAX_NUMBER_FIELDS = 100_000

# --- storage -------------------------------------------------------------------------------------
HUB_STORAGE_URL = env("HUB_STORAGE_URL") or (HUB_DATA_DIR / "objects").as_uri()
if not HUB_STORAGE_URL.startswith(("file://", "s3://")):
    raise ConfigError(f"HUB_STORAGE_URL must be file:///dir or s3://bucket[/prefix], not {HUB_STORAGE_URL!r}")
HUB_PRESIGN_SECONDS = envint("HUB_PRESIGN_SECONDS", 900)
HUB_LFS_THRESHOLD = envsize("HUB_LFS_THRESHOLD", "10MB")
HUB_MULTIPART_CHUNK = envsize("HUB_MULTIPART_CHUNK", "64MiB")
# An upload completion (assembling and verifying the parts) whose worker has been silent this long
# died: its session reopens so that the client's retry completes it from the parts already sent.
HUB_UPLOAD_STALE = envint("HUB_UPLOAD_STALE", 60)
# Quota reserved by a running request or task lapses this long after its holder stops renewing it
# (killed, its machine gone); uploaded LFS bytes keep theirs this long for the commit to come.
HUB_RESERVATION_LEASE = envint("HUB_RESERVATION_LEASE", 120)
HUB_COMMIT_WINDOW = envint("HUB_COMMIT_WINDOW", 3600)
# Xet (hub.xet): access tokens live this long (clients renew them); xorbs are kept this long after a
# shard last named them — hf_xet's shard cache lets a client reuse what it uploaded for ~3 weeks
# without sending it again, so a shorter retention would make its later uploads fail.
HUB_XET_TOKEN_SECONDS = envint("HUB_XET_TOKEN_SECONDS", 3600)
HUB_XET_RETENTION = envint("HUB_XET_RETENTION", 30 * 24 * 3600)
# On an S3 store, xorbs are written to it this many seconds after they arrived (hub.xet.staging),
# from the receiving server's disk, so an upload waits for one write of its bytes (the blob), not
# two. 0 writes each xorb before answering its upload.
HUB_XET_WRITE_BEHIND = envint("HUB_XET_WRITE_BEHIND", 30)
HUB_DEFAULT_QUOTA = envsize("HUB_DEFAULT_QUOTA", "50GB")
HUB_PUBLIC_URL = env("HUB_PUBLIC_URL")  # client-facing base URL when behind a proxy that hides it

# --- caches and rate limits ---------------------------------------------------------------------
# Rate limits count in the cache: shared across web replicas only with a shared cache (Redis).
HUB_CACHE_URL = env("HUB_CACHE_URL") or ""
CACHES = {"default": ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": HUB_CACHE_URL}
                      if HUB_CACHE_URL else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"})}
if not HUB_CACHE_URL:
    # Without a shared cache each process counts on its own (the limit is per worker): fine for one
    # machine; docker-compose points HUB_CACHE_URL at Redis.
    SILENCED_SYSTEM_CHECKS = ["django_ratelimit.E003", "django_ratelimit.W001"]
RATELIMIT_IP_META_KEY = env("HUB_CLIENT_IP_HEADER") or None  # e.g. HTTP_X_REAL_IP behind a proxy
HUB_AUTH_FAIL_RATE = env("HUB_AUTH_FAIL_RATE") or "30/m"  # wrong tokens or passwords per client address
HUB_TOKEN_CREATE_RATE = env("HUB_TOKEN_CREATE_RATE") or "20/m"  # new tokens (and instances) per user
# Seconds the catalog's home, list and search pages are kept for visitors without a session (0: never).
HUB_PAGE_CACHE_SECONDS = envint("HUB_PAGE_CACHE_SECONDS", 15)
# The dataset viewer (hub.viewer) reads at most this many bytes of each split's files; a bigger split
# shows its first rows and says so (partial, as upstream's viewer does).
HUB_VIEWER_MAX_BYTES = envsize("HUB_VIEWER_MAX_BYTES", "5GB")

# --- celery --------------------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL") or ""
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL  # embedded default: tasks run in-process
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND") or None
# Periodic work, run by `celery beat` where a broker is configured.
# Unreferenced bytes are kept this long (seconds) before garbage collection may delete them.
HUB_GC_GRACE = envint("HUB_GC_GRACE", 24 * 3600)
CELERY_BEAT_SCHEDULE = {
    "expire-upload-sessions": {"task": "hub.repos.tasks.expire_upload_sessions", "schedule": 300.0},
    "verify-unverified-blobs": {"task": "hub.repos.tasks.verify_unverified", "schedule": 600.0},
    "scrub-blobs": {"task": "hub.repos.tasks.scrub", "schedule": 3600.0},
    "collect-garbage": {"task": "hub.repos.tasks.collect_garbage", "schedule": 3600.0,
                        "kwargs": {"grace_seconds": HUB_GC_GRACE}},
}

# --- mirroring -----------------------------------------------------------------------------------
HUB_MIRROR_UPSTREAM = env("HUB_MIRROR_UPSTREAM") or "https://huggingface.co"  # default --source
# Hosts users who are not operators may mirror from (the server fetches what they name: keep
# internal addresses out). Default: the default upstream's host only.
HUB_MIRROR_USER_HOSTS = [h.strip().lower() for h in (env("HUB_MIRROR_USER_HOSTS") or "").split(",") if h.strip()] \
    or [(urlparse(HUB_MIRROR_UPSTREAM).hostname or "").lower()]
HUB_MIRROR_THREADS = envint("HUB_MIRROR_THREADS", 8)  # files fetched at once by one job
HUB_MIRROR_RETRIES = envint("HUB_MIRROR_RETRIES", 6)  # retries (with backoff) after transient failures
HUB_MIRROR_HEARTBEAT = envint("HUB_MIRROR_HEARTBEAT", 2)  # seconds between progress/heartbeat writes
HUB_MIRROR_STALE = envint("HUB_MIRROR_STALE", 30)  # a running job silent this long lost its worker
# Upstreams that are hubs like this one list files with sha256 and direct URLs (/api/v1/.../manifest);
# off: every upstream is read through the Hugging Face protocol only (tree + /resolve).
HUB_MIRROR_MANIFEST = envbool("HUB_MIRROR_MANIFEST", True)
# Catalog entries not mirrored are served from their upstream (HUB_MIRROR_UPSTREAM) on first use:
# their default branch pinned as a commit at first access, each file fetched on its first read.
HUB_ONDEMAND = envbool("HUB_ONDEMAND", True)
HUB_ONDEMAND_RECHECK = envint("HUB_ONDEMAND_RECHECK", 600)  # seconds between checks of upstream's branch
HUB_ONDEMAND_BUDGET = envsize("HUB_ONDEMAND_BUDGET", "1TB")  # fetched bytes kept; beyond it LRU is evicted
# Which catalog entries may be fetched: "*" (all), or namespaces and repo ids, comma-separated.
HUB_ONDEMAND_ALLOW = [s.strip() for s in (env("HUB_ONDEMAND_ALLOW") or "*").split(",") if s.strip()]
HUB_ONDEMAND_TOKEN = env("HUB_ONDEMAND_TOKEN") or ""  # the operator's upstream token (gated entries)
HUB_ONDEMAND_BLOCK = envsize("HUB_ONDEMAND_BLOCK", "16MiB")  # ranged reads ask upstream for whole blocks
HUB_ONDEMAND_TIMEOUT = envint("HUB_ONDEMAND_TIMEOUT", 30)  # seconds a reader waits on a silent upstream
CELERY_BEAT_SCHEDULE["ondemand-housekeeping"] = {"task": "hub.mirrors.tasks.ondemand_housekeeping", "schedule": 300.0}
CELERY_BEAT_SCHEDULE["recover-mirrors"] = {"task": "hub.mirrors.tasks.recover_mirrors", "schedule": 60.0}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": ["hub.accounts.auth.BearerTokenAuthentication",
                                       "rest_framework.authentication.SessionAuthentication"],
    "EXCEPTION_HANDLER": "hub.errors.drf_exception_handler",
}
SPECTACULAR_SETTINGS = {"TITLE": "Hub native API", "VERSION": "1",
                        "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                                                 "hub.errors.document_unavailable"]}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "filters": {"expected_404": {"()": "hub.logfilters.ExpectedNotFound"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL") or "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"},
                "django.request": {"filters": ["expected_404"]}},
}
