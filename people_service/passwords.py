"""Passwords: what a new one must be (NIST SP 800-63B rev 4), and how they are hashed."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from pathlib import Path

# OWASP's floor for PBKDF2-SHA256; about 0.15 s per check here, so the handshake is throttled
ITERATIONS = 600_000
MIN_LENGTH = 15  # NIST SP 800-63B rev. 4: the least for a password used alone


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
    if text in common_passwords():
        return True
    for size in range(1, 5):
        if len(text) % size == 0 and text == text[:size] * (len(text) // size):
            return True
    steps = {ord(b) - ord(a) for a, b in zip(text, text[1:], strict=False)}
    return steps in ({1}, {-1})


def names_its_context(password: str, username: str) -> bool:
    """NIST's context words: whether a password holds the username or the service's name."""
    text = plain(password)
    words = ["peopleservice", "people-service"]
    if len(username) >= 4:  # shorter names are in too many words to refuse them all
        words.append(username.casefold())
    return any(word in text for word in words)


def hash_password(password: str) -> str:
    """A salted PBKDF2-SHA256 hash, written as werkzeug.security writes it
    (`pbkdf2:sha256:<iterations>$<salt>$<hex>`), so either can check the other's hashes."""
    salt = secrets.token_urlsafe(12)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), ITERATIONS)
    return f"pbkdf2:sha256:{ITERATIONS}${salt}${digest.hex()}"


def check_password(stored: str, password: str) -> bool:
    """Whether `password` matches a hash of hash_password (constant-time comparison)."""
    try:
        method, salt, expected = stored.split("$", 2)
        kind, hash_name, iterations = method.split(":")
        if kind != "pbkdf2":
            return False
        digest = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt.encode(), int(iterations))
    except (ValueError, UnicodeEncodeError):
        return False
    return hmac.compare_digest(digest.hex(), expected)
