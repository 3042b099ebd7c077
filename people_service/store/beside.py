"""The file a SQLite store keeps beside its database: the secret that signs login tokens."""

from __future__ import annotations

import os
import secrets
import stat


def secret_beside(database: str) -> str:
    """The signing secret in secret.key beside the database, made once (mode 0600).

    Never read or written through a symbolic link; a file that other users could read or
    change is refused (ValueError naming it), since whoever knows it can sign tokens.
    """
    path = os.path.join(os.path.dirname(os.path.abspath(database)), "secret.key")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        _create(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise ValueError(f"{path} cannot be opened ({error.strerror}); it must be a file") from None
    with os.fdopen(fd, encoding="ascii") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if info.st_uid not in (os.geteuid(), 0) or info.st_mode & 0o077:
            raise ValueError(
                f"{path} can be read or changed by other users (mode "
                f"{stat.filemode(info.st_mode)}, owner uid {info.st_uid}); make it the service "
                f"user's alone (chmod 600) or remove it to make a new one"
            )
        return file.read().strip()


def _create(path: str) -> None:
    # written aside, then linked into place: a second process starting at the same moment
    # either links first or reads the whole secret, never an empty file
    draft = f"{path}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(draft, flags, 0o600), "w", encoding="ascii") as file:
        file.write(secrets.token_urlsafe(48) + "\n")
    try:
        os.link(draft, path, follow_symlinks=False)
    except FileExistsError:
        pass
    finally:
        os.unlink(draft)
