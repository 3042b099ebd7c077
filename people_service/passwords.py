"""Passwords: what a new one must be (NIST SP 800-63B rev 4), and how they are hashed."""

import functools
import os
import secrets
import threading
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from .errors import Busy

# OWASP's floor for PBKDF2-SHA256 (the PASSWORD_HASH_METHOD setting's default): slow on purpose
DEFAULT_METHOD = "pbkdf2:sha256:600000"
MIN_LENGTH = 15  # NIST SP 800-63B rev. 4: the least for a password used alone
# A check costs about 0.2 s of CPU at the default work factor (hashlib lets other threads run
# meanwhile): as many at once as this process has cores, so that a flood of logins, even
# refused ones, leaves other requests a share of the CPU; a login waits at most CHECK_WAIT
# seconds for a free check, then gets 503 (docs/limits.md#logins-and-passwords).
CHECKS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
CHECK_WAIT = 5.0
_checks: dict[int, threading.BoundedSemaphore] = {}  # by process id: none survives a fork


@functools.cache
def common_passwords() -> frozenset[str]:
    """The passwords refused as too common, in the form `plain` compares."""
    lines = Path(__file__).with_name("common_passwords.txt").read_text().splitlines()
    return frozenset(plain(line) for line in lines if line and not line.startswith("#"))


def plain(password: str) -> str:
    """A password without spaces, case folded: how the rules below compare it."""
    return "".join(password.split()).casefold()


def guessable(password: str) -> bool:
    """Common, one short pattern repeated, or a run such as 'abcdefg...' or '9876...'."""
    text = plain(password)
    repeated = any(text == text[:size] * (len(text) // size) for size in range(1, 5))
    steps = {ord(b) - ord(a) for a, b in zip(text, text[1:], strict=False)}
    return text in common_passwords() or repeated or steps in ({1}, {-1})


def names_its_context(password: str, username: str) -> bool:
    """NIST's context words: whether a password holds the username or the service's name."""
    text = plain(password)
    words = ["peopleservice", "people-service"]
    if len(username) >= 4:  # shorter names are in too many words to refuse them all
        words.append(username.casefold())
    return any(word in text for word in words)


def check_password(stored: str, password: str) -> bool:
    """Whether `password` matches a stored hash; False for a hash werkzeug cannot read.
    Raises Busy when no check is free within CHECK_WAIT seconds."""
    pid = os.getpid()
    # setdefault is atomic: of two threads first in a process, both use the one kept
    checks = _checks.get(pid) or _checks.setdefault(pid, threading.BoundedSemaphore(CHECKS))
    if not checks.acquire(timeout=CHECK_WAIT):
        raise Busy("Other logins are being checked; retry in a second.")
    try:
        return check_password_hash(stored, password)
    except ValueError:  # an unknown method or hash name, bad numbers, an unencodable password
        return False
    finally:
        checks.release()


@functools.cache
def dummy_hash(method: str) -> str:
    """A hash of nothing anyone knows: an unknown username costs what a wrong password costs."""
    return generate_password_hash(secrets.token_hex(16), method)
