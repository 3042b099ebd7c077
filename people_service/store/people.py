"""People, friendships and messages: their SQL, import, export and copies; times."""

import time
from datetime import UTC, datetime
from functools import partialmethod

from ..errors import Conflict, NotFound

PERSON_COLUMNS = "id, name, age, email, street, city, country"
MESSAGE_COLUMNS = "id, person_id, sender, content, created_at"
# what a copy between backends takes, in an order that keeps foreign keys satisfied
TABLES = ("people", "friendships", "messages", "api_keys", "users", "events")
EMAIL_TAKEN = "A person with this email already exists."
NEWEST = "created_at DESC, id DESC"


def iso(timestamp: float) -> str:
    """A POSIX time as RFC 3339 UTC with milliseconds."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(time.time())


def insert(table: str, columns) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def fold(text: str | None) -> str | None:
    """The case-insensitive form of names, emails and places, for search and uniqueness."""
    return None if text is None else text.casefold()


def contains(text: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for `text` anywhere."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


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


def _from(sender_id: str | None) -> tuple[str, tuple]:
    """The condition and parameters for messages from `sender_id` (None: from anyone)."""
    return ("", ()) if sender_id is None else (" AND sender_id = ?", (sender_id,))


def _values(person: dict) -> tuple:
    return tuple(fold(person[c[:-4]]) if c.endswith("_key") else person[c] for c in WRITTEN)


class PeopleStore:
    # names sort case-folded in code point order (PostgreSQL: COLLATE "C", whatever the locale)
    NAME_ORDER = "name_key"

    def _count(self, sql: str, params=()) -> int:
        return self._execute(f"SELECT count(*) AS n FROM {sql}", params)[0]["n"]

    def is_empty(self) -> bool:
        """Whether the database holds neither people nor API keys."""
        return not self._execute("SELECT 1 FROM people UNION ALL SELECT 1 FROM api_keys LIMIT 1")

    def _where(self, filters: dict | None) -> tuple[str, list]:
        given = [(key, (filters or {}).get(key)) for key in FILTERS]
        given = [(key, value) for key, value in given if value is not None]
        clauses = " AND ".join(FILTERS[key][0] for key, _ in given)
        return (f" WHERE {clauses}" if given else ""), [FILTERS[k][1](v) for k, v in given]

    def count_people(self, filters: dict | None = None) -> int:
        """How many people match `filters` (name, city, country, min_age, max_age)."""
        where, params = self._where(filters)
        return self._count(f"people{where}", params)

    def list_people(self, filters, limit: int, offset: int, sort=(), columns="id, name"):
        """People matching `filters`, by `sort` ((key, descending) pairs; ties by id)."""
        where, params = self._where(filters)
        names, terms = {"id": "id", "name": self.NAME_ORDER, "age": "age"}, []
        for key, descending in sort:
            terms.append(f"{names[key]} {'DESC' if descending else 'ASC'}")
            terms[-1] += " NULLS LAST" if key == "age" else ""
            if key == "id":
                break  # ids are unique: nothing after them can matter
        else:
            terms.append("id")
        sql = f"SELECT {columns} FROM people{where} ORDER BY {', '.join(terms)} LIMIT ? OFFSET ?"
        return self._execute(sql, (*params, limit, offset))

    list_people_details = partialmethod(list_people, columns=PERSON_COLUMNS)

    def get_person(self, person_id: int, lock: bool = False) -> dict | None:
        """A person; with `lock`, no other transaction changes it until this one ends."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE id = ?{self.FOR_UPDATE if lock else ''}"
        return self._execute(sql, (person_id,)).fetchone()

    def get_people(self, person_ids: list[int]) -> list[dict]:
        """The people with these ids (unknown ids are left out)."""
        if not person_ids:
            return []
        where, ids = self._in_ids("id", person_ids)
        return self._execute(f"SELECT {PERSON_COLUMNS} FROM people WHERE {where}", (ids,))

    def find_person(self, name: str) -> dict | None:
        """The person whose name equals `name` ignoring case, lowest id first."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE name_key = ? ORDER BY id LIMIT 1"
        return self._execute(sql, (fold(name),)).fetchone()

    def _fold_places(self) -> None:
        # a migration: Python's case folding, as every write computes it (no SQL dialect can)
        sql = "SELECT id, city, country FROM people WHERE city IS NOT NULL OR country IS NOT NULL"
        keys = [(fold(row["city"]), fold(row["country"]), row["id"]) for row in self._execute(sql)]
        self._executemany("UPDATE people SET city_key = ?, country_key = ? WHERE id = ?", keys)

    def insert_person(self, person: dict) -> int:
        """Insert a person (columns as in get_person, without id); returns its id."""
        now, columns = now_iso(), [*WRITTEN, "created_at", "updated_at"]
        try:
            return self._insert(insert("people", columns), (*_values(person), now, now))
        except Conflict:  # the one constraint a new row can break
            raise Conflict(EMAIL_TAKEN) from None

    def update_person(self, person_id: int, person: dict) -> None:
        """Replace every column of a person."""
        columns = "".join(f"{column} = ?, " for column in WRITTEN)
        sql = f"UPDATE people SET {columns}updated_at = ? WHERE id = ?"
        try:
            changed = self._changed(sql, (*_values(person), now_iso(), person_id))
        except Conflict:
            raise Conflict(EMAIL_TAKEN) from None
        if not changed:
            raise NotFound(f"No person with id '{person_id}'.")

    def delete_person(self, person_id: int) -> bool:
        return self._changed("DELETE FROM people WHERE id = ?", (person_id,))

    def add_friendship(self, person_id: int, friend_id: int) -> bool:
        """Make two people friends both ways; whether they became friends now."""
        sql = "INSERT INTO friendships VALUES (?, ?), (?, ?) ON CONFLICT DO NOTHING"
        return self._changed(sql, (person_id, friend_id, friend_id, person_id))

    def remove_friendship(self, person_id: int, friend_id: int) -> bool:
        """End a friendship both ways; whether there was one."""
        sql = "DELETE FROM friendships WHERE (person_id = ? AND friend_id = ?) OR"
        sql += " (person_id = ? AND friend_id = ?)"
        return self._changed(sql, (person_id, friend_id, friend_id, person_id))

    def count_friends(self, person_id: int) -> int:
        return self._count("friendships WHERE person_id = ?", (person_id,))

    def list_friends(self, person_id: int, limit: int, offset: int) -> list[dict]:
        """A page of a person's friends by id: id and name only."""
        sql = "SELECT p.id, p.name FROM friendships f JOIN people p ON p.id = f.friend_id"
        sql += " WHERE f.person_id = ? ORDER BY f.friend_id LIMIT ? OFFSET ?"
        return self._execute(sql, (person_id, limit, offset))

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

    def insert_message(self, message: dict) -> dict:
        """Store a message; returns it with its id (an unknown person is NotFound)."""
        self._writable()
        row = dict(message, created_at=now_iso())
        columns = ("person_id", "sender_id", "sender", "content", "created_at")
        try:
            row["id"] = self._insert(insert("messages", columns), [row[name] for name in columns])
        except Conflict:
            raise NotFound(f"No person with id '{row['person_id']}'.") from None
        del row["sender_id"]
        return row

    def get_message(self, message_id: int, sender_id: str | None) -> dict | None:
        """A message, if `sender_id` sent it (None: whoever did)."""
        condition, params = _from(sender_id)
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?{condition}"
        return self._execute(sql, (message_id, *params)).fetchone()

    def list_messages(self, person_id: int, sender_id, limit: int, offset: int) -> list[dict]:
        """Messages to a person (from `sender_id` unless None), newest first."""
        condition, params = _from(sender_id)
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE person_id = ?{condition}"
        sql += f" ORDER BY {NEWEST} LIMIT ? OFFSET ?"
        return self._execute(sql, (person_id, *params, limit, offset))

    def messages_of(self, person_ids: list[int], sender_id, limit: int) -> dict[int, list[dict]]:
        """The newest `limit` messages to each person (from `sender_id` unless None)."""
        where = _from(sender_id)
        return self._firsts(person_ids, limit, MESSAGE_COLUMNS, "messages", NEWEST, where)

    def import_people(self, people: list[dict], friendships: list[tuple[int, int]]) -> None:
        """Insert people with their ids and friendships, in the caller's transaction."""
        where, ids = self._in_ids("id", [person["id"] for person in people])
        taken = self._execute(f"SELECT id FROM people WHERE {where} LIMIT 1", (ids,)).fetchone()
        if taken:
            raise Conflict(f"A person with id '{taken['id']}' already exists.")
        now = now_iso()
        rows = [(person["id"], *_values(person), now, now) for person in people]
        try:
            self._executemany(insert("people", ["id", *WRITTEN, "created_at", "updated_at"]), rows)
        except Conflict:
            raise Conflict("Two people share an email (or one already exists).") from None
        pairs = sorted({pair for a, b in friendships for pair in ((a, b), (b, a))})
        self._executemany("INSERT INTO friendships VALUES (?, ?) ON CONFLICT DO NOTHING", pairs)
        self._ids_taken()

    def _ids_taken(self) -> None:
        """After rows were inserted with their own ids, new ids continue above them."""

    def export_people(self) -> tuple[list[dict], list[tuple[int, int]]]:
        """Every person (all columns of the details) and every friendship pair once."""
        people = self._execute(f"SELECT {PERSON_COLUMNS} FROM people ORDER BY id")
        sql = "SELECT person_id, friend_id FROM friendships WHERE person_id < friend_id"
        pairs = self._execute(sql + " ORDER BY person_id, friend_id")
        return people, [(row["person_id"], row["friend_id"]) for row in pairs]

    def dump(self) -> dict[str, list[dict]]:
        """Every row of every table a copy between backends takes."""
        return {table: self._execute(f"SELECT * FROM {table}") for table in TABLES}

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
            return {table: self._count(table) for table in TABLES}
