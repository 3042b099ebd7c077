"""Files a SQLite store keeps beside its database: the credentials epoch and the JWT secret."""

from __future__ import annotations

import mmap
import os
import secrets


class FilesBeside:
    """The credentials epoch and the signing secret, in files next to the database file
    (mixed into SQLiteStore, which provides `path`, `_lock`, `_epoch_map` and
    `_epoch_identity`)."""

    # -- the credentials epoch ------------------------------------------------------------------
    # Servers cache the callers of valid keys and tokens. A revocation, often made by the CLI in
    # another process, rewrites the 8 bytes of <database>.epoch; each server maps that file into
    # memory and compares the bytes on every request. One stat() per request checks that the
    # mapped file is still the one at that path: a file replaced or deleted (a restore, a
    # cleanup) is mapped afresh, so no revocation written into the new one is missed.

    @property
    def _epoch_path(self) -> str:
        return os.path.abspath(self.path) + ".epoch"

    def credentials_epoch(self) -> bytes | None:
        """Bytes that change whenever a credential is revoked; None if they cannot be read
        (then nothing may be cached)."""
        try:
            stat = os.stat(self._epoch_path)
            identity = (stat.st_dev, stat.st_ino)
        except OSError:
            identity = None  # gone: made again below, or nothing is cached
        mapping = self._epoch_map
        if mapping is None or identity != self._epoch_identity:
            try:
                mapping = self._map_epoch()
            except (OSError, ValueError):
                return None
        try:
            return mapping[:8]
        except ValueError:  # closed by close(): the store is shutting down
            return None

    def _map_epoch(self) -> mmap.mmap:
        with self._lock:
            fd = os.open(self._epoch_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                stat = os.fstat(fd)
                if stat.st_size < 8:
                    os.pwrite(fd, os.urandom(8), 0)
                mapping = mmap.mmap(fd, 8, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
            # the old mapping is not closed: a reader may hold it; it goes when unreferenced
            self._epoch_map = mapping
            self._epoch_identity = (stat.st_dev, stat.st_ino)
        return mapping

    def _credentials_changed(self) -> None:
        fd = os.open(self._epoch_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, os.urandom(8), 0)
        finally:
            os.close(fd)

    # -- the JWT secret -------------------------------------------------------------------------

    def stored_secret(self) -> str:
        """The signing secret kept in secret.key beside the database (made once, mode 0600)."""
        path = os.path.join(os.path.dirname(os.path.abspath(self.path)), "secret.key")
        if not os.path.exists(path):
            # written aside, then linked into place: a second process starting at the same moment
            # either links first or reads the whole secret, never an empty file
            draft = f"{path}.{os.getpid()}.tmp"
            fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(secrets.token_urlsafe(48) + "\n")
            try:
                os.link(draft, path)
            except FileExistsError:
                pass
            finally:
                os.unlink(draft)
        with open(path, encoding="ascii") as file:
            return file.read().strip()
