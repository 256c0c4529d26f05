"""Parley settings: one file, every knob an optional environment variable."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

from safety.secretkey import read_or_create

BASE_DIR = Path(__file__).resolve().parent.parent


# Every environment variable this module reads, as it reads them: `serve` passes these (and no
# others of Parley's) on to the processes it starts.
ENVIRONMENT_NAMES: set[str] = set()


def getenv(name: str, default: str = "") -> str:
    ENVIRONMENT_NAMES.add(name)
    return os.environ.get(name, default)


def envbool(name: str, default: str) -> bool:
    return getenv(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: int) -> int:
    return int(getenv(name) or default)


def envfloat(name: str, default: float) -> float:
    return float(getenv(name) or default)


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in getenv(name, default).split(",") if item.strip()]


# Never a default: sessions_app.checks refuses it with DEBUG off, should someone set it.
DEV_SECRET_KEY = "parley-insecure-development-key-change-me"
# Unset SECRET_KEY: one made for this installation on first start, kept in SECRET_KEY_FILE
# (mode 0600), so sessions outlive a restart and every process of this checkout agrees.
SECRET_KEY_FILE = BASE_DIR / getenv("SECRET_KEY_FILE", "var/secret_key")
SECRET_KEY = getenv("SECRET_KEY") or read_or_create(SECRET_KEY_FILE)
# Off unless asked for: Django's debug pages show code, settings and data to anyone.
DEBUG = envbool("DEBUG", "False")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",
    "csp",
    "sessions_app",
    "datasets_app",
    "evals_app",
    "budgets_app",
    "audit_app",
    "shares_app",
    "privacy_app",
    "openai_app",
    "serving",
]

# With PARLEY_TUNE_MIDDLEWARE, serving.tuning's subclasses of Django's and WhiteNoise's middleware
# (same names), whose hooks run on the event loop where they do no I/O; without, the stock ones.
PARLEY_TUNE_MIDDLEWARE = envbool("PARLEY_TUNE_MIDDLEWARE", "True")
STOCK_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]
MIDDLEWARE = [
    f"serving.tuning.{path.rpartition('.')[2]}" if PARLEY_TUNE_MIDDLEWARE else path
    for path in STOCK_MIDDLEWARE[:-1]
] + STOCK_MIDDLEWARE[-1:]
# Before the middleware that sets cookies, so that it sees them all (safety/cookies.py).
MIDDLEWARE.insert(2, "safety.cookies.LoopbackCookiesMiddleware")
if PARLEY_TUNE_MIDDLEWARE:
    # Django's security checks look for its middleware by dotted path: they would call the
    # subclasses missing, and skip what depends on them (cookies, HSTS, redirects).
    # sessions_app.checks runs them on STOCK_MIDDLEWARE instead.
    SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

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
            ],
        },
    },
]

DATABASE_URL = getenv("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'var' / 'parley.sqlite3'}"
# Database work runs on a few long-lived threads (the engine's and the sockets' on one, Django's
# async ORM and Channels both use it; requests' on PARLEY_REQUEST_THREADS more), each keeping
# its connection; without that every request's signals close it and the next query connects
# again. A broken one is replaced before it is used.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=envint("DB_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # PostgreSQL's JIT compiles every query it estimates costly, such as the admin's per-row
    # totals, where compiling costs more than it saves. PARLEY_PG_JIT=on restores it.
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _jit = "on" if envbool("PARLEY_PG_JIT", "off") else "off"
    _options["options"] = f"{_options.get('options', '')} -c jit={_jit}".strip()
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers proceed while a run checkpoints; IMMEDIATE avoids lock-upgrade deadlocks.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # A file, not :memory:, so the server processes that browser tests start share it.
    _db_file = Path(DATABASES["default"]["NAME"])
    DATABASES["default"]["TEST"] = {"NAME": str(_db_file.with_name(f"test_{_db_file.name}"))}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "sessions_app.User"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(getenv("STATIC_ROOT") or BASE_DIR / "var" / "staticfiles")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root

REDIS_URL = getenv("REDIS_URL", "")
if REDIS_URL:
    from serving.layers import redis_layer

    CHANNEL_LAYERS = {"default": redis_layer(REDIS_URL)}
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}
    }

# The model upstream. Unset LLM_BASE_URL means "the embedded model", which `serve` starts and
# then sets here, and in the environment of the worker processes it starts.
LLM_BASE_URL = getenv("LLM_BASE_URL", "")
# Set by `serve` for its worker processes when LLM_BASE_URL is the embedded model it started.
LLM_EMBEDDED = envbool("PARLEY_LLM_EMBEDDED", "False")
LLM_API_KEY = getenv("LLM_API_KEY") or getenv("OPENAI_API_KEY", "")
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
LLM_MODEL = getenv("LLM_MODEL") or ("gpt-4o-mini" if LLM_API_KEY else EMBEDDED_MODEL_NAME)
# The embedded server answers one request at a time, and its small model can go on and on: its
# answers stop at this many tokens so that one cannot hold it from every other chat (0: no cap).
PARLEY_EMBEDDED_MAX_TOKENS = envint("PARLEY_EMBEDDED_MAX_TOKENS", 1024)
LLM_CONNECT_TIMEOUT = envfloat("LLM_CONNECT_TIMEOUT", 10.0)
# Longest silence tolerated from the upstream, before the first token or between two.
LLM_READ_TIMEOUT = envfloat("LLM_READ_TIMEOUT", 120.0)
# Seconds an idle connection to the model endpoint is kept for the next request.
LLM_KEEPALIVE = envfloat("LLM_KEEPALIVE", 60.0)
# USD per million tokens, "model=input:output;model2=…"; unknown models have no cost.
LLM_PRICES = getenv("LLM_PRICES", "gpt-4o-mini=0.15:0.60;gpt-4o=2.50:10.00")

# Streaming: first delta at once, then one coalesced piece per interval.
PARLEY_COALESCE_INTERVAL = envfloat("PARLEY_COALESCE_INTERVAL", 0.05)
# Under load the interval stretches with the runs the server streams on its host (one base
# interval per PARLEY_COALESCE_RUNS runs), up to this: fewer, larger pieces, still a steady flow.
PARLEY_COALESCE_MAX_INTERVAL = envfloat("PARLEY_COALESCE_MAX_INTERVAL", 0.15)
PARLEY_COALESCE_RUNS = envint("PARLEY_COALESCE_RUNS", 50)
# Partial answers are saved at most this often while a run streams; under load the interval
# stretches by one interval per PARLEY_COALESCE_RUNS runs streaming in the process.
PARLEY_CHECKPOINT_INTERVAL = envfloat("PARLEY_CHECKPOINT_INTERVAL", 1.0)
# Changes to how the libraries Parley runs on behave (serving/tuning.py says why), each on unless
# set to false; PARLEY_TUNE_MIDDLEWARE is with MIDDLEWARE above.
PARLEY_TUNE_PRELOAD_URLS = envbool("PARLEY_TUNE_PRELOAD_URLS", "True")
PARLEY_TUNE_GC = envbool("PARLEY_TUNE_GC", "True")
PARLEY_TUNE_ADMIN_CHECKBOX = envbool("PARLEY_TUNE_ADMIN_CHECKBOX", "True")
# Long-lived threads (each keeping its database connection) that run requests' synchronous code.
PARLEY_TUNE_REQUEST_THREADS = envbool("PARLEY_TUNE_REQUEST_THREADS", "True")
PARLEY_REQUEST_THREADS = envint("PARLEY_REQUEST_THREADS", 8)
# Each process marks its runs alive this often, and at the same beat interrupts the runs of
# processes that died: at once when they ran on this host, else once silent for STALE seconds.
# A run whose process died is so marked within INTERVAL (this host) or STALE + INTERVAL seconds.
PARLEY_HEARTBEAT_INTERVAL = envfloat("PARLEY_HEARTBEAT_INTERVAL", 10.0)
PARLEY_STALE_RUN_AFTER = envfloat("PARLEY_STALE_RUN_AFTER", 30.0)
# /healthz probes the model endpoint at most once per this many seconds (per process).
PARLEY_HEALTHZ_CACHE_SECONDS = envfloat("PARLEY_HEALTHZ_CACHE_SECONDS", 5.0)
# Evaluation: how many answers an experiment asks for at once.
PARLEY_EVAL_CONCURRENCY = envint("PARLEY_EVAL_CONCURRENCY", 8)
# Live evaluation: how many runs a process scores at once, in the background of its answers.
PARLEY_EVAL_LIVE_CONCURRENCY = envint("PARLEY_EVAL_LIVE_CONCURRENCY", 2)
PARLEY_MAX_INPUT_CHARS = envint("PARLEY_MAX_INPUT_CHARS", 32000)
# A session's state and metadata, and an agent's initial state, as JSON (each is sent upstream).
PARLEY_MAX_STATE_BYTES = envint("PARLEY_MAX_STATE_BYTES", 64 * 1024)
# A dataset's export check reports turns longer than this: most likely a pasted file or a
# runaway answer.
PARLEY_DATASET_MAX_TURN_CHARS = envint("PARLEY_DATASET_MAX_TURN_CHARS", 32000)
PARLEY_ADMIN_PASSWORD = getenv("PARLEY_ADMIN_PASSWORD", "")
# Ask the model for a short title after a session's first answer.
PARLEY_GENERATE_TITLES = envbool("PARLEY_GENERATE_TITLES", "True")
PARLEY_SIGNUP_ENABLED = envbool("PARLEY_SIGNUP_ENABLED", "True")
# Runs a user may start per minute (REST API and WebSocket alike); 0 turns the limit off.
PARLEY_RUNS_PER_MINUTE = envint("PARLEY_RUNS_PER_MINUTE", 30)
# New sessions a user may start per minute (POST /api/sessions, a run without a session, a new
# chat); 0 turns the limit off.
PARLEY_SESSIONS_PER_MINUTE = envint("PARLEY_SESSIONS_PER_MINUTE", 30)
# Each person's budget unless staff set one for them or their group (budgets_app.defaults):
# e.g. "200000 tokens/day, 5 usd/month, 500 runs/week"; empty: no limit.
PARLEY_DEFAULT_BUDGET = getenv("PARLEY_DEFAULT_BUDGET", "")
# Days a session is kept after its last activity before `manage.py purge_expired` deletes it
# (an agent may set its own); 0: forever.
PARLEY_RETENTION_DAYS = envint("PARLEY_RETENTION_DAYS", 0)
# Share links open for anyone with the link; off: for signed-in users only.
PARLEY_PUBLIC_SHARE_LINKS = envbool("PARLEY_PUBLIC_SHARE_LINKS", "False")
# Processes serving Parley on this host: `serve`'s default for --workers (more than one needs
# REDIS_URL); each worker is told their number, and paces its answers' pieces by the host's load.
PARLEY_WORKERS = envint("PARLEY_WORKERS", 1)
# The nginx that `serve --workers N` runs in front of them; unset, nginx on PATH or in /usr/sbin.
PARLEY_NGINX = getenv("PARLEY_NGINX", "")
# Addresses or networks of proxies that nginx trusts, as it trusts one on loopback, to say the
# client's address and scheme (X-Forwarded-For, X-Forwarded-Proto): one in front of several hosts.
PARLEY_TRUSTED_PROXIES = envlist("PARLEY_TRUSTED_PROXIES", "")
# Wrong passwords for one account from one client address within the window (seconds) before
# that address gets no more checked for it; as many for an account from all addresses together
# start slowing the addresses that failed for it (sessions_app/accounts/login_throttle.py).
# 0 turns the throttle off. Counted in the database: every process sees them.
PARLEY_LOGIN_FAILURES = envint("PARLEY_LOGIN_FAILURES", 10)
# Wrong passwords from one address, whatever the accounts; higher: many people may sign in from
# one (a NAT, a proxy that does not say who the client is); 0 counts no addresses.
PARLEY_LOGIN_FAILURES_PER_ADDRESS = envint("PARLEY_LOGIN_FAILURES_PER_ADDRESS", 100)
PARLEY_LOGIN_WINDOW = envint("PARLEY_LOGIN_WINDOW", 15 * 60)
# The longest an address that failed for a much-guessed account waits between tries (seconds);
# 0: no slowing.
PARLEY_LOGIN_DELAY_MAX = envint("PARLEY_LOGIN_DELAY_MAX", 30)
# The largest request body accepted: refused from its announced or counted size, before it is
# read whole (safety/bodylimit.py). The largest chat socket message: daphne, started by
# `serve`, closes a socket sent a longer one as it arrives; the consumer refuses it too.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("PARLEY_MAX_REQUEST_BYTES", 2_621_440)
PARLEY_MAX_SOCKET_MESSAGE_BYTES = envint("PARLEY_MAX_SOCKET_MESSAGE_BYTES", 1_048_576)

# Error reports (debug pages, e-mails, the log) with the installation's secrets masked.
DEFAULT_EXCEPTION_REPORTER = "safety.reporting.SecretsReporter"
DEFAULT_EXCEPTION_REPORTER_FILTER = "safety.reporting.SecretsFilter"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"masked": {"()": "safety.reporting.SecretsFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "masked"}},
    "loggers": {
        "parley": {"handlers": ["console"], "level": getenv("LOG_LEVEL", "INFO")},
        # A request that failed, with its traceback: Django's own handler prints it only with
        # DEBUG on, and unmasked.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

# -- security headers and cookies ---------------------------------------------------------------
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# Explains a refused form, above all the one refused because secure cookies met plain HTTP.
CSRF_FAILURE_VIEW = "sessions_app.web.csrf_views.csrf_failure"
# Scripts and styles from Parley's own origin only; no inline script anywhere (htmx's own
# indicator style is turned off in base.html). Inline styles stay allowed: the answers'
# sanitized Markdown aligns table cells with them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Behind a proxy of its own (nginx, as `serve --workers` runs it), where daphne is reachable from
# nowhere else: the client's address and scheme are the proxy's X-Forwarded-For and -Proto.
# Never set where clients reach daphne directly, since they could then claim any of both.
PARLEY_PROXY_HEADERS = envbool("PARLEY_PROXY_HEADERS", "False")
# Behind another proxy that ends TLS and sets this header (e.g. X-Forwarded-Proto), requests it
# marks https count as secure: HSTS is sent and secure cookies are expected.
PROXY_SSL_HEADER = getenv("PROXY_SSL_HEADER", "X-Forwarded-Proto" if PARLEY_PROXY_HEADERS else "")
if PROXY_SSL_HEADER:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + PROXY_SSL_HEADER.upper().replace("-", "_"), "https")

if not DEBUG:
    SESSION_COOKIE_SECURE = envbool("SECURE_COOKIES", "True")
    CSRF_COOKIE_SECURE = envbool("SECURE_COOKIES", "True")
    # Django's own: redirect plain HTTP to HTTPS (health checks on loopback excepted), and tell
    # browsers to use only HTTPS for this many seconds (sent on HTTPS responses only).
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "False")
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "False")
    SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "False")
WHITENOISE_USE_FINDERS = DEBUG
