"""Passwords: what a new one must be (NIST SP 800-63B rev 4), and how they are hashed."""

import functools
import secrets
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

# OWASP's floor for PBKDF2-SHA256 (the PASSWORD_HASH_METHOD setting's default): slow on purpose
DEFAULT_METHOD = "pbkdf2:sha256:600000"
MIN_LENGTH = 15  # NIST SP 800-63B rev. 4: the least for a password used alone


def plain(password: str) -> str:
    """A password without spaces, case folded: how the rules below compare it."""
    return "".join(password.split()).casefold()


@functools.cache
def common_passwords() -> frozenset[str]:
    lines = Path(__file__).with_name("common_passwords.txt").read_text().splitlines()
    return frozenset(plain(line) for line in lines if line and not line.startswith("#"))


def guessable(password: str) -> bool:
    """Common, one short pattern repeated, or a run such as 'abcdefg...' or '9876...'."""
    text = plain(password)
    repeated = any(text == text[:size] * (len(text) // size) for size in range(1, 5))
    steps = {ord(b) - ord(a) for a, b in zip(text, text[1:], strict=False)}
    return text in common_passwords() or repeated or steps in ({1}, {-1})


def names_its_context(password: str, username: str) -> bool:
    """NIST's context words: whether a password holds the username or the service's name."""
    words = ["peopleservice", "people-service"]
    if len(username) >= 4:  # shorter names are in too many words to refuse them all
        words.append(username.casefold())
    return any(word in plain(password) for word in words)


def check_password(stored: str, password: str) -> bool:
    """Whether `password` matches a stored hash (False for a hash werkzeug cannot read); it
    costs ~0.2 s of CPU, so callers take a turn at the runtime's LoginGate first."""
    try:
        return check_password_hash(stored, password)
    except ValueError:  # an unknown method or hash name, bad numbers, an unencodable password
        return False


@functools.cache
def dummy_hash(method: str) -> str:
    """A hash of nothing anyone knows: an unknown username costs what a wrong password costs."""
    return generate_password_hash(secrets.token_hex(16), method)
