"""Bulk transfer: import and export of people, and copying every table to another database."""

from ..errors import Conflict
from .people import WRITTEN
from .schema import PERSON_COLUMNS, TABLES, insert, now_iso


class TransferStore:
    def import_people(self, people: list[dict], friendships: list[tuple[int, int]]) -> None:
        """Insert people with their ids and friendships, in the caller's transaction."""
        where, ids = self._in_ids("id", [person["id"] for person in people])
        taken = self._execute(f"SELECT id FROM people WHERE {where} LIMIT 1", (ids,)).fetchone()
        if taken:
            raise Conflict(f"A person with id '{taken['id']}' already exists.")
        now = now_iso()
        rows = [(person["id"], *self._person_values(person), now, now) for person in people]
        try:
            self._executemany(insert("people", ["id", *WRITTEN, "created_at", "updated_at"]), rows)
        except Conflict:
            raise Conflict("Two people share an email (or one already exists).") from None
        pairs = {pair for a, b in friendships for pair in ((a, b), (b, a))}
        self._executemany(
            "INSERT INTO friendships (person_id, friend_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            sorted(pairs),
        )
        self._ids_taken()

    def _ids_taken(self) -> None:
        """After rows were inserted with their own ids, new ids continue above them."""

    def export_people(self) -> tuple[list[dict], list[tuple[int, int]]]:
        """Every person (all columns of the details) and every friendship pair once."""
        people = self._execute(f"SELECT {PERSON_COLUMNS} FROM people ORDER BY id").fetchall()
        pairs = self._execute(
            "SELECT person_id, friend_id FROM friendships WHERE person_id < friend_id"
            " ORDER BY person_id, friend_id"
        ).fetchall()
        return people, [(row["person_id"], row["friend_id"]) for row in pairs]

    def dump(self) -> dict[str, list[dict]]:
        """Every row of every table a migration copies."""
        return {table: self._execute(f"SELECT * FROM {table}").fetchall() for table in TABLES}

    def load(self, tables: dict[str, list[dict]]) -> dict[str, int]:
        """Copy dumped rows into this (empty) database in one transaction; returns counts."""
        with self.transaction():
            if not self.is_empty():
                raise Conflict("The target database already holds people or API keys.")
            for table in (table for table in TABLES if tables[table]):
                names = list(tables[table][0])
                rows = [tuple(row[name] for name in names) for row in tables[table]]
                self._executemany(insert(table, names), rows)
            self._ids_taken()
            return {
                table: self._execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]
                for table in TABLES
            }
