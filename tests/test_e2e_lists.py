"""End to end: friends lists, sorted and filtered pages, strict query strings, error bodies."""

from __future__ import annotations

import json
import re

from .conftest import GraphQLClient, demo_people

LINK = re.compile(r'<([^>]+)>; rel="(next|prev)"')


def links(response) -> dict[str, str]:
    return {rel: url for url, rel in LINK.findall(response.headers.get("Link", ""))}


def test_a_demo_persons_friends_over_http(demo_server):
    demo = demo_people()
    expected = sorted(demo["2"]["friends"], key=int)
    response = demo_server.request("GET", "/person/2/friends", headers=demo_server.headers)
    assert response.status_code == 200
    assert response.json() == [{"id": pid, "name": demo[pid]["name"]} for pid in expected]
    assert response.headers["X-Total-Count"] == str(len(expected))
    first = demo_server.request("GET", "/person/2/friends?limit=2", headers=demo_server.headers)
    assert [entry["id"] for entry in first.json()] == expected[:2]
    assert links(first) == {"next": "/person/2/friends?limit=2&offset=2"}
    missing = demo_server.request("GET", "/person/999/friends", headers=demo_server.headers)
    assert missing.status_code == 404
    assert missing.headers["Content-Type"] == "application/problem+json"


def test_sorted_filtered_pages_over_http_add_up_to_the_filtered_set(demo_server):
    demo = demo_people().values()
    chosen = [
        person
        for person in demo
        if (person.get("address") or {}).get("country") == "United States"
        and person.get("age") is not None
        and person["age"] >= 50
    ]
    chosen.sort(key=lambda person: (-person["age"], person["name"].casefold(), int(person["id"])))
    url = "/people?country=united%20states&min_age=50&sort=-age,name&limit=3"
    seen, pages = [], 0
    while url:
        response = demo_server.request("GET", url, headers=demo_server.headers)
        assert response.status_code == 200
        assert response.headers["X-Total-Count"] == str(len(chosen))
        seen += response.json()
        pages += 1
        url = links(response).get("next")
        if url:
            assert "country=united+states" in url and "sort=-age,name" in url
    assert pages == -(-len(chosen) // 3) >= 2
    assert seen == [{"id": person["id"], "name": person["name"]} for person in chosen]


def test_unknown_and_repeated_parameters_over_http_are_400_problems(demo_server):
    for method, url, named in (
        ("GET", "/people?limt=3", "limt"),
        ("GET", "/people?limit=1&limit=2", "limit"),
        ("GET", "/person/1/friends?sort=name", "sort"),
        ("GET", "/me?verbose=1", "verbose"),
        ("DELETE", "/person/1?force=1", "force"),
        ("HEAD", "/people?limt=3", None),
        ("OPTIONS", "/people?limt=3", "limt"),
    ):
        response = demo_server.request(method, url, headers=demo_server.headers)
        assert response.status_code == 400, (method, url)
        assert response.headers["Content-Type"] == "application/problem+json"
        if named is not None:
            assert response.content.endswith(b"}\n")
            assert list(response.json()["errors"]) == [named]
    assert demo_server.request("GET", "/person/1", headers=demo_server.headers).status_code == 200


def test_error_bodies_over_http_are_compact_json_with_a_newline(demo_server):
    headers = demo_server.headers
    answers = [
        demo_server.request("GET", "/person/999", headers=headers),
        demo_server.request("DELETE", "/people", headers=headers),
        demo_server.request("GET", "/people"),
        demo_server.request("POST", "/person", json={"name": ""}, headers=headers),
        demo_server.request("GET", "/people?sort=name;DROP", headers=headers),
    ]
    assert [answer.status_code for answer in answers] == [404, 405, 401, 422, 400]
    for answer in answers:
        body = answer.json()
        compact = json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n"
        assert answer.content == compact.encode("utf-8")
    assert answers[3].json()["detail"] == "name: Length must be between 1 and 200."


def test_graphql_people_sorted_and_filtered_over_http(demo_server):
    graphql = GraphQLClient(demo_server, demo_server.headers)
    query = (
        "query($country: String, $sort: [PersonSort!]) "
        "{ people(country: $country, minAge: 50, sort: $sort, limit: 3) { name age } }"
    )
    for method in ("GET", "POST"):
        response = graphql(method, query, {"country": "UNITED STATES", "sort": ["AGE_DESC"]})
        assert response.status_code == 200
        people = response.json()["data"]["people"]
        assert len(people) == 3
        ages = [person["age"] for person in people]
        assert ages == sorted(ages, reverse=True) and min(ages) >= 50
    refused = graphql("GET", "{ people(minAge: 60, maxAge: 50) { id } }")
    error = refused.json()["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"] == "minAge: Must not be greater than the maximum age."
    assert error["extensions"]["errors"] == {
        "minAge": ["Must not be greater than the maximum age."]
    }
