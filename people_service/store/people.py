"""People and friendships: the SQL of the people endpoints and of GraphQL's batched loads."""

from __future__ import annotations

from ..errors import Conflict, NotFound
from .common import contains, fold, now_iso
from .schema import PERSON_COLUMNS

EMAIL_TAKEN = "A person with this email already exists."
# each filter of a people list: its condition and its parameter, from the value given
FILTERS = {
    "name": ("name_key LIKE ? ESCAPE '\\'", lambda name: contains(fold(name))),
    "city": ("city_key = ?", fold),
    "country": ("country_key = ?", fold),
    "min_age": ("age >= ?", lambda age: age),
    "max_age": ("age <= ?", lambda age: age),
}
# the columns a write sets, and the column each folded key is made from
WRITTEN = PERSON_COLUMNS.split(", ")[1:] + ["name_key", "email_key", "city_key", "country_key"]


class PeopleStore:
    """People and their friendships (mixed into Store)."""

    # -- people -----------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """True when the database holds neither people nor API keys."""
        row = self._execute(
            "SELECT (SELECT count(*) FROM people) + (SELECT count(*) FROM api_keys) AS n"
        ).fetchone()
        return row["n"] == 0

    # How names sort: the case-folded name in code point order (PostgreSQL says COLLATE "C"
    # so that its order does not depend on the database's locale).
    NAME_ORDER = "name_key"

    def _where(self, filters: dict | None) -> tuple[str, list]:
        """The WHERE clause of a people list and its parameters; None values filter nothing."""
        given = {key: value for key, value in (filters or {}).items() if value is not None}
        clauses = [FILTERS[key][0] for key in FILTERS if key in given]
        params = [FILTERS[key][1](given[key]) for key in FILTERS if key in given]
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _order(self, sort) -> str:
        """ORDER BY terms for (key, descending) pairs: nulls last either way, then id."""
        columns = {"id": "id", "name": self.NAME_ORDER, "age": "age"}
        terms = []
        for key, descending in sort:
            term = f"{columns[key]} {'DESC' if descending else 'ASC'}"
            terms.append(term + " NULLS LAST" if key == "age" else term)
            if key == "id":
                return ", ".join(terms)  # ids are unique: nothing after them can matter
        return ", ".join([*terms, "id"])

    def count_people(self, filters: dict | None = None) -> int:
        """How many people match `filters` (name, city, country, min_age, max_age)."""
        where, params = self._where(filters)
        return self._execute(f"SELECT count(*) AS n FROM people{where}", params).fetchone()["n"]

    def list_people(self, filters: dict | None, limit: int, offset: int, sort=()) -> list[dict]:
        """People who match `filters`, in the order of `sort` ((key, descending) pairs of id,
        name and age; ties by id): id and name only."""
        return self._people("id, name", filters, limit, offset, sort)

    def list_people_details(
        self, filters: dict | None, limit: int, offset: int, sort=()
    ) -> list[dict]:
        """As list_people, with every column of the details."""
        return self._people(PERSON_COLUMNS, filters, limit, offset, sort)

    def _people(self, columns: str, filters, limit: int, offset: int, sort) -> list[dict]:
        where, params = self._where(filters)
        sql = f"SELECT {columns} FROM people{where} ORDER BY {self._order(sort)} LIMIT ? OFFSET ?"
        return self._execute(sql, (*params, limit, offset)).fetchall()

    def get_person(self, person_id: int, lock: bool = False) -> dict | None:
        """A person; `lock`: and no other transaction changes or deletes it until this one
        ends (a write that depends on what it read)."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE id = ?{self.FOR_UPDATE if lock else ''}"
        return self._execute(sql, (person_id,)).fetchone()

    def get_people(self, person_ids: list[int]) -> list[dict]:
        """The people with these ids, in one statement (unknown ids are left out)."""
        if not person_ids:
            return []
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE {self._in_ids('id')}"
        return self._execute(sql, (self._ids(person_ids),)).fetchall()

    def find_person(self, name: str) -> dict | None:
        """The person whose name equals `name` ignoring case, lowest id first."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE name_key = ? ORDER BY id LIMIT 1"
        return self._execute(sql, (fold(name),)).fetchone()

    @staticmethod
    def _person_values(person: dict) -> tuple:
        return tuple(
            fold(person[column[:-4]]) if column.endswith("_key") else person[column]
            for column in WRITTEN
        )

    def _fold_places(self) -> None:
        """Fill city_key and country_key from city and country (a migration: Python's case
        folding, exactly as every write computes them, which neither SQL dialect offers)."""
        rows = self._execute(
            "SELECT id, city, country FROM people WHERE city IS NOT NULL OR country IS NOT NULL"
        ).fetchall()
        self._executemany(
            "UPDATE people SET city_key = ?, country_key = ? WHERE id = ?",
            [(fold(row["city"]), fold(row["country"]), row["id"]) for row in rows],
        )

    def insert_person(self, person: dict) -> int:
        """Insert a person (columns as in get_person, without id); returns the new id."""
        now = now_iso()
        try:
            return self._insert(
                f"INSERT INTO people ({', '.join(WRITTEN)}, created_at, updated_at)"
                f" VALUES ({', '.join('?' * (len(WRITTEN) + 2))})",
                (*self._person_values(person), now, now),
            )
        except Conflict:  # the one constraint a new row can break
            raise Conflict(EMAIL_TAKEN) from None

    def update_person(self, person_id: int, person: dict) -> None:
        """Replace every column of a person."""
        columns = "".join(f"{column} = ?, " for column in WRITTEN)
        try:
            changed = self._changed(
                f"UPDATE people SET {columns}updated_at = ? WHERE id = ?",
                (*self._person_values(person), now_iso(), person_id),
            )
        except Conflict:
            raise Conflict(EMAIL_TAKEN) from None
        if not changed:
            raise NotFound(f"No person with id '{person_id}'.")

    def delete_person(self, person_id: int) -> bool:
        """Delete a person; friendships and messages go with it (ON DELETE CASCADE)."""
        return self._changed("DELETE FROM people WHERE id = ?", (person_id,))

    # -- friendships ----------------------------------------------------------------------

    def add_friendship(self, person_id: int, friend_id: int) -> None:
        """Make two people friends both ways; already being friends is fine."""
        self._execute(
            "INSERT INTO friendships (person_id, friend_id) VALUES (?, ?), (?, ?)"
            " ON CONFLICT DO NOTHING",
            (person_id, friend_id, friend_id, person_id),
        )

    def remove_friendship(self, person_id: int, friend_id: int) -> None:
        self._execute(
            "DELETE FROM friendships WHERE (person_id = ? AND friend_id = ?)"
            " OR (person_id = ? AND friend_id = ?)",
            (person_id, friend_id, friend_id, person_id),
        )

    def count_friends(self, person_id: int) -> int:
        sql = "SELECT count(*) AS n FROM friendships WHERE person_id = ?"
        return self._execute(sql, (person_id,)).fetchone()["n"]

    def list_friends(self, person_id: int, limit: int, offset: int) -> list[dict]:
        """A page of a person's friends by id: id and name only."""
        return self._execute(
            "SELECT p.id, p.name FROM friendships f JOIN people p ON p.id = f.friend_id"
            " WHERE f.person_id = ? ORDER BY f.friend_id LIMIT ? OFFSET ?",
            (person_id, limit, offset),
        ).fetchall()

    def friends_of(self, person_ids: list[int], limit: int) -> dict[int, list[dict]]:
        """The first `limit` friends (by id) of each person, in one statement."""
        result: dict[int, list[dict]] = {person_id: [] for person_id in person_ids}
        if not person_ids or limit <= 0:
            return result
        rows = self._execute(
            f"SELECT owner, {PERSON_COLUMNS} FROM ("
            f" SELECT f.person_id AS owner, p.*, ROW_NUMBER() OVER"
            f" (PARTITION BY f.person_id ORDER BY f.friend_id) AS n"
            f" FROM friendships f JOIN people p ON p.id = f.friend_id"
            f" WHERE {self._in_ids('f.person_id')}"
            f") AS ranked WHERE n <= ? ORDER BY owner, id",
            (self._ids(person_ids), limit),
        )
        for row in rows:
            result[row.pop("owner")].append(row)
        return result
