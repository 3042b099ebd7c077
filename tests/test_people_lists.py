"""People lists: sorting, filters, a person's friends, their indexes; through the test client."""

from __future__ import annotations

import random

import pytest

from people_service import service, transfer
from people_service.errors import InvalidArgument
from people_service.schemas import SORT_PATTERN
from people_service.store.base import MIGRATIONS
from people_service.store.sqlite import SQLiteStore

from .conftest import count_statements


def ids(response) -> list[str]:
    assert response.status_code == 200, response.json
    return [entry["id"] for entry in response.json]


@pytest.fixture
def crowd(make_person):
    """Seven people whose names, ages and places make every order and filter tell."""
    people = [
        ("bob", 40, "London", "United Kingdom"),
        ("Ada", 36, "LONDON", "united kingdom"),
        ("Émile", None, "Paris", "France"),
        ("alan", 36, "Straße", "Deutschland"),
        ("Zoe", 5, "STRASSE", "DEUTSCHLAND"),
        ("ada", None, None, None),
        ("Carl", 150, "Londonderry", "United Kingdom"),
    ]
    for name, age, city, country in people:
        make_person(name, age=age, address={"city": city, "country": country})
    # ids 1..7 in that order
    return people


def test_sort_by_name_ignores_case_and_breaks_ties_by_id(client, headers, crowd):
    # case-folded names in code point order: 'ada' (2), 'ada' (6), 'alan', 'bob', 'carl', 'zoe',
    # 'émile' (é sorts after z)
    assert ids(client.get("/people?sort=name", headers=headers)) == list("2641753")
    assert ids(client.get("/people?sort=-name", headers=headers)) == list("3571426")


def test_people_without_an_age_come_last_in_both_directions(client, headers, crowd):
    assert ids(client.get("/people?sort=age", headers=headers)) == list("5241736")
    assert ids(client.get("/people?sort=-age", headers=headers)) == list("7124536")


def test_sort_keys_apply_in_order_and_id_descending_works(client, headers, crowd):
    assert ids(client.get("/people?sort=age,-name", headers=headers)) == list("5421736")
    assert ids(client.get("/people?sort=-id", headers=headers)) == list("7654321")
    assert ids(client.get("/people?sort=id,name", headers=headers)) == list("1234567")


def test_city_and_country_match_the_whole_value_with_unicode_case_folding(client, headers, crowd):
    london = client.get("/people?city=london", headers=headers)
    assert ids(london) == ["1", "2"]  # not Londonderry: the whole value
    assert london.headers["X-Total-Count"] == "2"
    # ß folds to ss, as names already do
    assert ids(client.get("/people?city=strasse", headers=headers)) == ["4", "5"]
    assert ids(client.get("/people?city=STRAßE", headers=headers)) == ["4", "5"]
    assert ids(client.get("/people?country=UNITED%20KINGDOM", headers=headers)) == ["1", "2", "7"]
    assert ids(client.get("/people?city=Lond", headers=headers)) == []


def test_age_range_is_inclusive_and_leaves_out_unknown_ages(client, headers, crowd):
    assert ids(client.get("/people?min_age=36&max_age=40", headers=headers)) == ["1", "2", "4"]
    assert ids(client.get("/people?min_age=0", headers=headers)) == list("12457")
    assert ids(client.get("/people?max_age=36", headers=headers)) == ["2", "4", "5"]
    assert ids(client.get("/people?min_age=150&max_age=150", headers=headers)) == ["7"]


def test_filters_combine_with_name_sort_and_paging(client, headers, crowd):
    response = client.get(
        "/people?name=A&country=united%20kingdom&min_age=30&sort=-age&limit=2", headers=headers
    )
    # 'a' in the name, in the UK, 30 or older: Carl (150), Ada (36); bob has no 'a'
    assert ids(response) == ["7", "2"]
    assert response.headers["X-Total-Count"] == "2"
    assert "Link" not in response.headers


def test_link_header_keeps_every_parameter(client, headers, crowd):
    response = client.get(
        "/people?sort=-age,name&city=London&country=United%20Kingdom&min_age=1&max_age=99"
        "&name=a&limit=1&offset=1",
        headers=headers,
    )
    assert response.headers["X-Total-Count"] == "1"
    assert response.headers["Link"] == (
        "</people?limit=1&offset=0&name=a&city=London&country=United+Kingdom&min_age=1"
        '&max_age=99&sort=-age,name>; rel="prev"'
    )
    first = client.get("/people?city=London&sort=-age&limit=1", headers=headers)
    assert first.headers["Link"] == '</people?limit=1&offset=1&city=London&sort=-age>; rel="next"'
    # following the link gives the next page of the same list
    following = client.get("/people?limit=1&offset=1&city=London&sort=-age", headers=headers)
    assert ids(first) + ids(following) == ["1", "2"]


def test_empty_text_filters_filter_nothing(client, headers, crowd):
    assert ids(client.get("/people?name=&city=&country=", headers=headers)) == list("1234567")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("sort=height", "sort"),
        ("sort=name,name", "sort"),
        ("sort=name,-name", "sort"),
        ("sort=name,,age", "sort"),
        ("sort=,name", "sort"),
        ("sort=name,", "sort"),
        ("sort=", "sort"),
        ("sort=name;DROP%20TABLE%20people", "sort"),
        ("sort=NAME", "sort"),
        ("sort=%2Bname", "sort"),
        ("sort=--name", "sort"),
        ("sort=" + "name," * 30, "sort"),
        ("min_age=1.5", "min_age"),
        ("min_age=12.0", "min_age"),
        ("min_age=-1", "min_age"),
        ("min_age=abc", "min_age"),
        ("min_age=1e2", "min_age"),
        ("min_age=", "min_age"),
        ("max_age=151", "max_age"),
        ("max_age=99999999999999999999", "max_age"),
        ("min_age=9&max_age=3", "min_age"),
        ("city=%00", "city"),
        ("country=" + "x" * 201, "country"),
    ],
)
def test_bad_list_parameters_are_400_naming_the_parameter(client, headers, crowd, query, field):
    response = client.get(f"/people?{query}", headers=headers)
    assert response.status_code == 400
    assert response.content_type == "application/problem+json"
    assert list(response.json["errors"]) == [field]
    assert response.json["detail"].startswith(f"{field}: ")
    assert len(response.data) < 600  # a hostile value is not echoed at length
    assert client.get("/people", headers=headers).headers["X-Total-Count"] == "7"


def test_sort_messages_say_what_is_wrong(client, headers):
    def detail(sort):
        return client.get(f"/people?sort={sort}", headers=headers).json["detail"]

    assert detail("height") == (
        "sort: Unknown sort key 'height'; use id, name or age, each optionally prefixed with "
        "'-' (descending)."
    )
    assert detail("age,-age") == "sort: Sorts by 'age' twice; give each key once."
    assert detail("age,,id").startswith("sort: Has an empty item;")
    assert client.get("/people?min_age=9&max_age=3", headers=headers).json == {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "min_age: Must not be greater than the maximum age.",
        "errors": {"min_age": ["Must not be greater than the maximum age."]},
    }


def sort_values(depth: int = 4) -> list[str]:
    """Every comma list of up to `depth` items drawn from the keys, '-keys' and two wrong ones."""
    items = ["id", "-id", "name", "-name", "age", "-age", "x", ""]
    values, layer = [], [[]]
    for _ in range(depth):
        layer = [[*prefix, item] for prefix in layer for item in items]
        values += [",".join(value) for value in layer]
    return values


def test_the_documented_sort_pattern_accepts_exactly_what_the_service_accepts():
    import re

    pattern = re.compile(SORT_PATTERN)
    for value in sort_values():
        try:
            service.people_query(sort=value)
            accepted = True
        except InvalidArgument:
            accepted = False
        assert accepted == (pattern.fullmatch(value) is not None), value


# -- against a reference ------------------------------------------------------------------


def reference(people: list[dict], query: dict) -> list[str]:
    """The ids a query must answer, computed in Python from the rules in the README."""

    def folded(value):
        return None if value is None else value.casefold()

    def keep(person):
        address, age = person["address"], person["age"]
        return (
            (query["name"] is None or query["name"].casefold() in person["name"].casefold())
            and (query["city"] is None or folded(address["city"]) == query["city"].casefold())
            and (
                query["country"] is None
                or folded(address["country"]) == query["country"].casefold()
            )
            and (query["min_age"] is None or (age is not None and age >= query["min_age"]))
            and (query["max_age"] is None or (age is not None and age <= query["max_age"]))
        )

    chosen = [person for person in people if keep(person)]
    chosen.sort(key=lambda person: int(person["id"]))
    for key, descending in reversed(query["sort"]):
        value = {"id": lambda p: int(p["id"]), "name": lambda p: p["name"].casefold()}.get(key)
        if key == "age":
            known = [p for p in chosen if p["age"] is not None]
            unknown = [p for p in chosen if p["age"] is None]
            known.sort(key=lambda p: p["age"], reverse=descending)
            chosen = known + unknown
        else:
            chosen.sort(key=value, reverse=descending)
    start = query["offset"]
    return [person["id"] for person in chosen[start : start + query["limit"]]]


def test_lists_match_a_reference_on_a_random_population(store):
    rng = random.Random(20261122)
    names = [
        "ada",
        "Ada",
        "ÅSA",
        "åsa",
        "Zoë",
        "zoe",
        "Bob",
        "bob",
        "Straße",
        "ß",
        "Ωmega",
        "émile",
    ]
    places = [None, "London", "london", "LONDON", "Straße", "STRASSE", "Paris", "İstanbul"]
    for index in range(150):
        service.create_person(
            store,
            {
                "name": rng.choice(names) + rng.choice(["", " ", " x", "Y"]) * (index % 3),
                "age": rng.choice([None, None, 0, 1, 36, 36, 80, 150]),
                "address": {"city": rng.choice(places), "country": rng.choice(places)},
            },
        )
    people = [service.get_person(store, str(n)) for n in range(1, 151)]
    orders = [None, "name", "-name", "age", "-age", "age,-name", "-age,name", "-id", "name,-id"]
    for _ in range(60):
        args = {
            "name": rng.choice([None, "a", "S", "ss", "bob"]),
            "city": rng.choice([None, "london", "STRASSE", "paris", "İstanbul"]),
            "country": rng.choice([None, None, "london", "strasse"]),
            "min_age": rng.choice([None, None, 0, 36]),
            "max_age": rng.choice([None, None, 36, 150]),
            "sort": rng.choice(orders),
            "limit": rng.choice([1, 7, 100]),
            "offset": rng.choice([0, 0, 3, 40]),
        }
        entries, total, query = service.list_people(store, **args)
        expected = reference(people, query)
        assert [entry["id"] for entry in entries] == expected, args
        assert total == len(reference(people, {**query, "limit": 1000, "offset": 0})), args


# -- the folded keys on every write ---------------------------------------------------------


def test_changes_and_imports_keep_the_city_and_country_keys(client, headers, make_person, store):
    made = make_person("Ada", address={"city": "London", "country": "UK"})
    client.patch(f"/person/{made['id']}", json={"address": {"city": "Paris"}}, headers=headers)
    assert ids(client.get("/people?city=london", headers=headers)) == []
    assert ids(client.get("/people?city=PARIS", headers=headers)) == [made["id"]]
    client.put(f"/person/{made['id']}", json={"name": "Ada"}, headers=headers)
    assert ids(client.get("/people?city=paris", headers=headers)) == []
    assert ids(client.get("/people?country=uk", headers=headers)) == []
    transfer.import_people(
        store,
        {
            "people": [
                {"id": "50", "name": "Imported", "address": {"city": "KÖLN", "country": None}}
            ]
        },
    )
    assert ids(client.get("/people?city=köln", headers=headers)) == ["50"]


def test_the_migration_folds_the_places_people_already_have(tmp_path, sqlite_only):
    old = SQLiteStore(str(tmp_path / "old.db"))
    old.upgrade_schema()  # the whole schema, then back to how version 2 left people
    db = old._db()
    with old.transaction():
        db.conn.execute("DROP INDEX people_city_key")
        db.conn.execute("DROP INDEX people_country_key")
        db.conn.execute("DROP INDEX people_age")
        db.conn.execute("ALTER TABLE people DROP COLUMN city_key")
        db.conn.execute("ALTER TABLE people DROP COLUMN country_key")
        for later in ("persisted_queries", "deliveries", "webhooks", "events"):  # later versions'
            db.conn.execute(f"DROP TABLE {later}")
        db.conn.execute(
            "INSERT INTO people (name, name_key, city, country, created_at, updated_at)"
            " VALUES ('Ada', 'ada', 'STRAßE', 'Deutschland', 'now', 'now')"
        )
        db.conn.execute("PRAGMA user_version = 2")
    old.close()
    store = SQLiteStore(str(tmp_path / "old.db"))
    assert store.upgrade_schema() == len(MIGRATIONS)
    entries, total, _ = service.list_people(store, city="strasse", country="DEUTSCHLAND")
    assert (entries, total) == ([{"id": "1", "name": "Ada"}], 1)
    indexes = {row["name"] for row in store._execute("PRAGMA index_list(people)").fetchall()}
    assert {"people_city_key", "people_country_key", "people_age"} <= indexes
    store.close()


# -- indexes ------------------------------------------------------------------------------


def test_a_filtered_sorted_page_of_10000_people_uses_indexes(store, sqlite_only):
    rng = random.Random(7)
    cities = ["London", "Paris", "Kyoto", "Lima", "Oslo"] + [f"Town {n}" for n in range(200)]
    people = [
        {
            "id": str(n),
            "name": f"Person {rng.randrange(10**6)}",
            "age": rng.choice([None, *range(100)]),
            "address": {"city": rng.choice(cities), "country": f"Country {n % 50}"},
        }
        for n in range(1, 10_001)
    ]
    transfer.import_people(store, {"people": people})
    conn = store._db().conn
    queries = [
        {"sort": "name", "limit": 20},
        {"sort": "-name", "limit": 20},
        {"sort": "age", "limit": 20},
        {"sort": "-age,name", "limit": 20, "offset": 100},
        {"city": "london", "limit": 20},
        {"city": "london", "sort": "-age,name", "limit": 20},
        {"country": "country 7", "min_age": 30, "sort": "name", "limit": 20},
        {"min_age": 30, "max_age": 35, "limit": 20},
        {"city": "paris", "min_age": 10, "max_age": 50, "sort": "-age", "limit": 5},
    ]
    for args in queries:
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            entries, total, _ = service.list_people(store, **args)
        finally:
            conn.set_trace_callback(None)
        # the page and the count, in one read transaction
        assert statements[0] == "BEGIN" and statements[-1] == "COMMIT", statements
        statements = statements[1:-1]
        assert len(statements) == 2 and total >= len(entries) > 0, args
        for sql in statements:
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
            # every read of the table goes through an index (SEARCH or SCAN ... USING INDEX)
            assert all("USING" in step for step in plan if "people" in step), (args, plan)
            if "city" not in args and "country" not in args and "max_age" not in args:
                # a sort alone reads in index order: at most the ties are sorted
                assert "USE TEMP B-TREE FOR ORDER BY" not in plan, (args, plan)


# -- a person's friends ---------------------------------------------------------------------


@pytest.fixture
def circle(client, headers, make_person):
    for name in ("Ada", "Bob", "Cy", "Di", "Ed"):
        make_person(name)
    for friend in ("5", "2", "4"):
        assert client.put(f"/person/1/friends/{friend}", headers=headers).status_code == 204


def test_friends_are_listed_by_id_with_total_and_links(client, headers, circle):
    response = client.get("/person/1/friends", headers=headers)
    assert response.json == [
        {"id": "2", "name": "Bob"},
        {"id": "4", "name": "Di"},
        {"id": "5", "name": "Ed"},
    ]
    assert response.headers["X-Total-Count"] == "3"
    assert "Link" not in response.headers
    first = client.get("/person/1/friends?limit=2", headers=headers)
    assert ids(first) == ["2", "4"]
    assert first.headers["Link"] == '</person/1/friends?limit=2&offset=2>; rel="next"'
    second = client.get("/person/1/friends?limit=2&offset=2", headers=headers)
    assert ids(second) == ["5"]
    assert second.headers["Link"] == '</person/1/friends?limit=2&offset=0>; rel="prev"'
    # friendship is mutual, and a person without friends has an empty list
    assert ids(client.get("/person/4/friends", headers=headers)) == ["1"]
    empty = client.get("/person/3/friends", headers=headers)
    assert (empty.json, empty.headers["X-Total-Count"]) == ([], "0")


def test_friends_of_an_unknown_person_is_404(client, headers, circle):
    response = client.get("/person/99/friends", headers=headers)
    assert response.status_code == 404
    assert response.json["detail"] == "No person with id '99'."
    assert client.get("/person/0/friends", headers=headers).status_code == 404


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "limit=abc", "limit=1.5", "offset=-1", "offset=2147483648"]
)
def test_friends_paging_is_checked_as_for_people(client, headers, circle, query):
    response = client.get(f"/person/1/friends?{query}", headers=headers)
    assert response.status_code == 400
    assert list(response.json["errors"]) == [query.split("=")[0]]


def test_friends_need_the_read_scope(client, circle, app):
    from .conftest import new_key

    writer = {"X-API-Key": new_key(app, "writer", "write")}
    assert client.get("/person/1/friends").status_code == 401
    assert client.get("/person/1/friends", headers=writer).status_code == 403


def test_a_friends_page_runs_a_bounded_number_of_statements(client, headers, circle, store):
    def run():
        service.list_friends(store, "1", limit=100)

    assert count_statements(store, run) <= 5  # three reads, and BEGIN and COMMIT around them
