"""People and friendships: the SQL of the people endpoints and of GraphQL's batched loads."""

from functools import partialmethod

from ..errors import Conflict, NotFound
from .schema import PERSON_COLUMNS, insert, now_iso


def fold(text: str | None) -> str | None:
    """The case-insensitive form of names, emails and places, for search and uniqueness."""
    return None if text is None else text.casefold()


def contains(text: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for `text` anywhere: % and _ are plain characters here."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


EMAIL_TAKEN = "A person with this email already exists."
# each filter of a people list: its condition, and its parameter from the value given
FILTERS = {
    "name": ("name_key LIKE ? ESCAPE '\\'", lambda name: contains(fold(name))),
    "city": ("city_key = ?", fold),
    "country": ("country_key = ?", fold),
    "min_age": ("age >= ?", lambda age: age),
    "max_age": ("age <= ?", lambda age: age),
}
# the columns a write sets; each `<column>_key` is the folded <column>
WRITTEN = PERSON_COLUMNS.split(", ")[1:] + ["name_key", "email_key", "city_key", "country_key"]


class PeopleStore:
    # names sort case-folded in code point order (PostgreSQL's COLLATE "C", whatever the locale)
    NAME_ORDER = "name_key"

    def is_empty(self) -> bool:
        """True when the database holds neither people nor API keys."""
        row = self._execute(
            "SELECT (SELECT count(*) FROM people) + (SELECT count(*) FROM api_keys) AS n"
        ).fetchone()
        return row["n"] == 0

    def _where(self, filters: dict | None) -> tuple[str, list]:
        given = {key: value for key, value in (filters or {}).items() if value is not None}
        clauses = [FILTERS[key][0] for key in FILTERS if key in given]
        params = [FILTERS[key][1](given[key]) for key in FILTERS if key in given]
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _order(self, sort) -> str:
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

    def list_people(
        self, filters: dict | None, limit: int, offset: int, sort=(), columns="id, name"
    ) -> list[dict]:
        """People who match `filters`, ordered by `sort` ((key, descending) pairs of id, name
        and age; ties by id)."""
        where, params = self._where(filters)
        sql = f"SELECT {columns} FROM people{where} ORDER BY {self._order(sort)} LIMIT ? OFFSET ?"
        return self._execute(sql, (*params, limit, offset)).fetchall()

    list_people_details = partialmethod(list_people, columns=PERSON_COLUMNS)

    def get_person(self, person_id: int, lock: bool = False) -> dict | None:
        """A person; with `lock`, no other transaction changes it until this one ends."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE id = ?{self.FOR_UPDATE if lock else ''}"
        return self._execute(sql, (person_id,)).fetchone()

    def get_people(self, person_ids: list[int]) -> list[dict]:
        """The people with these ids, in one statement (unknown ids are left out)."""
        if not person_ids:
            return []
        where, ids = self._in_ids("id", person_ids)
        return self._execute(f"SELECT {PERSON_COLUMNS} FROM people WHERE {where}", (ids,))

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
        # a migration: Python's case folding, as every write computes it (no SQL dialect can)
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
            columns = [*WRITTEN, "created_at", "updated_at"]
            return self._insert(insert("people", columns), (*self._person_values(person), now, now))
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
        source = "friendships JOIN people ON id = friend_id"
        return self._firsts(person_ids, limit, PERSON_COLUMNS, source, "friend_id")

    def _firsts(self, owners, limit, columns, source, order, where=("", ())):
        # the first `limit` rows of `source` for each owner (its person_id), by `order`
        (condition, params), result = where, {owner: [] for owner in owners}
        if not owners or limit <= 0:
            return result
        owned, ids = self._in_ids("person_id", owners)
        rows = self._execute(
            f"SELECT person_id AS owner, {columns} FROM ("
            f" SELECT *, ROW_NUMBER() OVER (PARTITION BY person_id ORDER BY {order}) AS n"
            f" FROM {source} WHERE {owned}{condition}"
            f") AS ranked WHERE n <= ? ORDER BY owner, n",
            (ids, *params, limit),
        )
        for row in rows:
            result[row.pop("owner")].append(row)
        return result
