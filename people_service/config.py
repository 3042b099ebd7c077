"""Settings: defaults, then PEOPLE_SERVICE_* environment variables, then explicit overrides."""

import ipaddress
import os
import re

from limits import parse_many

PREFIX = "PEOPLE_SERVICE_"

DEFAULTS: dict[str, object] = {
    # SQLite file (relative to the working directory) or a postgresql:// URL
    "DATABASE": "data/people.db",
    # JWT signing secret (32+ bytes); unset: generated once and kept by the store
    "SECRET_KEY": None,
    # lifetime of a login token, in seconds
    "TOKEN_TTL": 3600,
    # default limit of every API key and user, read at request time
    "RATE_LIMIT": "600/minute",
    # limit per address without valid credentials, and of each caller's too-complex queries
    "ANONYMOUS_RATE_LIMIT": "60/minute",
    # limit of the token handshake, per client address and username
    "AUTH_RATE_LIMIT": "10/minute",
    # rate-limit counters: memory://, sqlite://[PATH] or redis://host:port; unset: beside DATABASE
    "RATE_LIMIT_STORAGE": "",
    # prefix of the counters' keys, so several deployments can share one Redis
    "RATE_LIMIT_PREFIX": "people-service",
    # the page GET /graphql serves to a browser: playground, graphiql or none
    "EXPLORER": "playground",
    # base URL of an npm CDN the explorer loads its assets from; empty: the service's own copy
    "EXPLORER_CDN": "",
    # whether GraphQL introspection (__schema, __type) is allowed
    "INTROSPECTION": True,
    # deepest GraphQL selection allowed
    "GRAPHQL_MAX_DEPTH": 10,
    # largest estimated GraphQL cost (nodes that can come back) allowed
    "GRAPHQL_MAX_COST": 5000,
    # most aliases one GraphQL operation may use, counted through its fragments
    "GRAPHQL_MAX_ALIASES": 30,
    # largest request body, in bytes
    "MAX_BODY_BYTES": 1 << 20,
    # level of the people_service loggers (the access log is INFO)
    "LOG_LEVEL": "INFO",
    # reverse proxies whose X-Forwarded-For is believed: comma list of addresses or networks
    "TRUSTED_PROXY": "",
    # seconds between flushes of the per-key usage counters to the database
    "USAGE_FLUSH_SECONDS": 5,
    # whether GET /metrics answers and requests are counted for it (prometheus-client)
    "METRICS": True,
    # sites whose pages may call the API (comma list of origins, or *); empty: CORS is off
    "CORS_ORIGINS": "",
    # how new passwords are hashed: pbkdf2:HASH:ROUNDS or scrypt:N:R:P (lower only for tests)
    "PASSWORD_HASH_METHOD": "pbkdf2:sha256:600000",
    # most event streams one process holds; 0: half of serve's --threads, else 4
    "EVENT_STREAMS": 0,
    # seconds an event stream lasts before the server ends it with a retry: hint
    "EVENT_STREAM_SECONDS": 300,
    # most seconds between two writes to an event stream (a comment line when nothing happens)
    "EVENT_HEARTBEAT_SECONDS": 15,
    # seconds a webhook receiver has to answer (connect included) before the attempt fails
    "WEBHOOK_TIMEOUT": 10,
    # seconds between a failed delivery attempt and the next (comma list); after the last: failed
    "WEBHOOK_RETRY_SCHEDULE": "5,300,1800,7200,18000,36000,36000",
    # whether webhook URLs may reach loopback, private and link-local addresses (tests, LANs)
    "WEBHOOK_ALLOW_PRIVATE": False,
    # days events and finished deliveries are kept
    "EVENT_RETENTION_DAYS": 7,
}

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
AUTO = ("EVENT_STREAMS",)  # integer settings where 0 means "chosen for the server"
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
    """`PEOPLE_SERVICE_NAME must RULE[, not VALUE]`."""
    return ConfigError(f"{PREFIX}{name} must {rule}" + "".join(f", not {v!r}" for v in value))


def load(overrides: dict | None = None, environ=None) -> dict:
    """The effective settings, checked; raises ConfigError."""
    environ = os.environ if environ is None else environ
    config = dict(DEFAULTS)
    for name, default in DEFAULTS.items():
        if (raw := environ.get(PREFIX + name)) is not None:
            config[name] = parse(name, default, raw)
    config.update(overrides or {})
    check(config)
    return config


def parse(name: str, default, raw: str):
    """An environment variable's text as the type of its default."""
    if isinstance(default, bool):
        if raw.strip().lower() not in TRUE + FALSE:
            raise refused(name, "be true or false", raw)
        return raw.strip().lower() in TRUE
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise refused(name, "be an integer", raw) from None
    return raw


def check(config: dict) -> None:
    """Refuse settings that would fail later, with a message naming the setting."""
    for name in ("RATE_LIMIT", "ANONYMOUS_RATE_LIMIT", "AUTH_RATE_LIMIT"):
        if problem := limit_problem(config[name]):
            raise refused(name, problem, config[name])
    for name, (pattern, rule) in PATTERNS.items():
        if not re.fullmatch(pattern, str(config[name] or "")):
            raise refused(name, rule, config[name])
    for name in [name for name, value in DEFAULTS.items() if type(value) is int]:
        value, least = config[name], 0 if name in AUTO else 1
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
