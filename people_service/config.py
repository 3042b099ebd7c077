"""Settings: defaults, then PEOPLE_SERVICE_* environment variables, then explicit overrides."""

import ipaddress
import os
import re

from limits import parse_many

PREFIX = "PEOPLE_SERVICE_"
DEFAULTS: dict[str, object] = {  # the README's table says more of each
    "DATABASE": "data/people.db",  # SQLite file (relative to the working directory) or URL
    "SECRET_KEY": None,  # JWT signing secret (32+ bytes); unset: the store's, made once
    "TOKEN_TTL": 3600,  # lifetime of a login token, in seconds
    "RATE_LIMIT": "600/minute",  # default limit of every API key and user
    "ANONYMOUS_RATE_LIMIT": "60/minute",  # per address without credentials; too-complex queries
    "AUTH_RATE_LIMIT": "10/minute",  # of the token handshake, per client address and username
    "RATE_LIMIT_STORAGE": "",  # memory://, sqlite://[PATH] or redis://; unset: beside DATABASE
    "RATE_LIMIT_PREFIX": "people-service",  # of the counters' keys: deployments share a Redis
    "EXPLORER": "playground",  # the page GET /graphql serves a browser
    "EXPLORER_CDN": "",  # npm CDN of the explorer's assets; empty: the service's own copy
    "INTROSPECTION": True,  # whether GraphQL introspection is allowed
    "GRAPHQL_MAX_DEPTH": 10,  # deepest GraphQL selection allowed
    "GRAPHQL_MAX_COST": 5000,  # largest estimated GraphQL cost (nodes that can come back)
    "GRAPHQL_MAX_ALIASES": 30,  # most aliases of one GraphQL operation, through its fragments
    "MAX_BODY_BYTES": 1 << 20,  # largest request body, in bytes
    "LOG_LEVEL": "INFO",  # of the people_service loggers (the access log is INFO)
    "TRUSTED_PROXY": "",  # proxies whose X-Forwarded-For is believed: addresses or networks
    "USAGE_FLUSH_SECONDS": 5,  # between flushes of the per-key usage counters
    "METRICS": True,  # whether GET /metrics answers and requests are counted for it
    "CORS_ORIGINS": "",  # origins whose pages may call the API, or *; empty: CORS is off
    "PASSWORD_HASH_METHOD": "pbkdf2:sha256:600000",  # for new passwords (lower only for tests)
    "EVENT_STREAMS": 0,  # most event streams per process; 0: half of serve's --threads, else 4
    "EVENT_STREAM_SECONDS": 300,  # an event stream's life, ended with a retry: hint
    "EVENT_HEARTBEAT_SECONDS": 5,  # most seconds between two writes to an event stream
    "WEBHOOK_TIMEOUT": 10,  # seconds a webhook receiver has to answer, connect included
    "WEBHOOK_RETRY_SCHEDULE": "5,300,1800,7200,18000,36000,36000",  # seconds between attempts
    "WEBHOOK_ALLOW_PRIVATE": False,  # whether webhook URLs may reach private addresses
    "EVENT_RETENTION_DAYS": 7,  # days events and finished deliveries are kept
}
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# scheme://host[:port], as browsers send it in Origin (a trailing slash is forgiven)
ORIGIN = re.compile(r"(https?)://([a-z0-9.-]+|\[[0-9a-f:.]+\])(:[0-9]{1,5})?/?", re.IGNORECASE)
# Settings that must match a pattern in full, and what they must be
PATTERNS = {
    "EXPLORER": ("playground|graphiql|none", "be one of playground, graphiql, none"),
    "LOG_LEVEL": (
        "(?i:DEBUG|INFO|WARNING|ERROR|CRITICAL)",
        "be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
    ),
    "RATE_LIMIT_STORAGE": (
        r"(?s:((memory|sqlite|redis|rediss|redis\+unix)://.*)?)",
        "be empty, memory://, sqlite:// (optionally followed by a file path) or redis://host:port",
    ),
    # what werkzeug's generate_password_hash accepts as a method
    "PASSWORD_HASH_METHOD": (
        r"pbkdf2(:sha(256|384|512)(:[1-9][0-9]{0,8})?)?|scrypt((:[1-9][0-9]*){3})?",
        "look like pbkdf2:sha256:600000 or scrypt:32768:8:1",
    ),
    # an http(s) URL or a path on this server, without what would break out of HTML
    "EXPLORER_CDN": (
        r"(https?://[A-Za-z0-9.:\[\]-]+)?(/[A-Za-z0-9._~@%+/-]*)?",
        "be an http(s) URL such as https://cdn.jsdelivr.net/npm",
    ),
}


class ConfigError(ValueError):
    """A setting that cannot work; start-up stops with its one-line message."""


def refused(name: str, rule: str, *value) -> ConfigError:
    return ConfigError(f"{PREFIX}{name} must {rule}" + "".join(f", not {v!r}" for v in value))


def load(overrides: dict | None = None, environ=None) -> dict:
    """The effective settings, checked; raises ConfigError."""
    environ = os.environ if environ is None else environ
    config = dict(DEFAULTS)
    for name, default in DEFAULTS.items():
        if (raw := environ.get(PREFIX + name)) is None:
            continue
        if isinstance(default, bool) and raw.strip().lower() in TRUE + FALSE:
            config[name] = raw.strip().lower() in TRUE
        elif isinstance(default, bool):
            raise refused(name, "be true or false", raw)
        elif isinstance(default, int):
            try:
                config[name] = int(raw)
            except ValueError:
                raise refused(name, "be an integer", raw) from None
        else:
            config[name] = raw
    config.update(overrides or {})
    check(config)
    return config


def check(config: dict) -> None:
    """Refuse settings that would fail later, with a message naming the setting."""
    for name in ("RATE_LIMIT", "ANONYMOUS_RATE_LIMIT", "AUTH_RATE_LIMIT"):
        if problem := limit_problem(config[name]):
            raise refused(name, problem, config[name])
    for name, (pattern, rule) in PATTERNS.items():
        if not re.fullmatch(pattern, str(config[name] or "")):
            raise refused(name, rule, config[name])
    for name in [name for name, value in DEFAULTS.items() if type(value) is int]:
        value, least = config[name], 0 if name == "EVENT_STREAMS" else 1  # 0: chosen by serve
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise refused(name, "be 0 or more" if least == 0 else "be a positive integer")
    # the flush thread waits this long: past what threading can wait for, it would die silently
    if config["USAGE_FLUSH_SECONDS"] > 86_400:
        raise refused("USAGE_FLUSH_SECONDS", "be at most 86400 (a day)")
    if config["SECRET_KEY"] and len(str(config["SECRET_KEY"]).encode()) < 32:
        raise refused("SECRET_KEY", "be at least 32 bytes long")
    cors_origins(config["CORS_ORIGINS"])
    trusted_proxies(config["TRUSTED_PROXY"])
    retry_schedule(config["WEBHOOK_RETRY_SCHEDULE"])


def cors_origins(value) -> list[str]:
    """CORS_ORIGINS as a list: [] (off), ["*"], or origins like "https://app.example.org"."""
    entries = value.split(",") if isinstance(value, str) else list(value or ())
    origins = [str(entry).strip() for entry in entries if str(entry).strip()]
    if origins == ["*"]:
        return origins
    for origin in origins:
        if not ORIGIN.fullmatch(origin):
            rule = "be * or a comma list of origins such as https://app.example.org"
            raise refused("CORS_ORIGINS", rule, origin)
    return [origin.rstrip("/").lower() for origin in origins]


def trusted_proxies(value) -> list:
    """TRUSTED_PROXY as networks (an address is a network of one address)."""
    try:
        parts = [part.strip() for part in str(value or "").split(",") if part.strip()]
        return [ipaddress.ip_network(part, strict=False) for part in parts]
    except ValueError:
        rule = "be addresses or networks such as 10.0.0.0/8, comma separated"
        raise refused("TRUSTED_PROXY", rule, value) from None


def retry_schedule(value) -> list[float]:
    """WEBHOOK_RETRY_SCHEDULE as seconds: a comma list of numbers, each 0 to a day."""
    try:
        delays = [float(item) for item in str(value).split(",") if item.strip()]
    except ValueError:
        delays = []
    if not delays or not all(0 <= delay <= 86_400 for delay in delays):
        rule = "be a comma list of seconds (0 to 86400) such as 5,300,1800"
        raise refused("WEBHOOK_RETRY_SCHEDULE", rule, value)
    return delays


def limit_problem(value) -> str | None:
    """What is wrong with a rate limit such as '10/second;500/hour', or None."""
    try:
        items = parse_many(str(value)) if value else None
    except ValueError:
        items = None
    if not items:
        return "look like '600/minute' or '100 per hour'"
    if any(item.amount < 1 for item in items):  # 429 forever, Retry-After inviting retries
        return "allow at least one request in each window"
    return None
