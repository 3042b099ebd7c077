"""The event stream read by a page in real Chromium with fetch (EventSource cannot send a key)."""

from __future__ import annotations

import re

import pytest

from .conftest import ROOT, start_demo
from .test_browser import ARGS, CHROMIUM, chromium, other_sites  # noqa: F401 (fixtures)

DOCS = ROOT / "docs" / "events-feed.md"


def docs_reader() -> str:
    """The reader function docs/events-feed.md shows: the test runs what users copy."""
    (code,) = re.findall(r"```js\n(.*?)```", DOCS.read_text(), flags=re.S)
    return code


@pytest.fixture(scope="module")
def site(chromium, tmp_path_factory, other_sites):  # noqa: F811
    server = start_demo(tmp_path_factory.mktemp("feed-browser"), CORS_ORIGINS=other_sites[0])
    yield server
    server.stop()


def test_a_page_on_another_site_follows_the_stream_with_fetch_and_resumes(
    chromium,  # noqa: F811
    site,
    other_sites,  # noqa: F811
):
    made = site.request("POST", "/person", json={"name": "Before"}, headers=site.headers).json()
    (before,) = site.request("GET", "/events?type=person.created", headers=site.headers).json()
    context = chromium.new_context()
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(other_sites[0])
        seen = page.evaluate(
            "async ([base, key, resumeAfter]) => {\n"
            + docs_reader()
            + """
              const seen = [];
              const controller = new AbortController();
              const done = followEvents(base + "/events", key, resumeAfter, (event) => {
                seen.push(event);
                if (seen.length === 1) {  // the resumed event came: now a change, live
                  fetch(base + "/person", {method: "POST", body: JSON.stringify({name: "Live"}),
                    headers: {"X-API-Key": key, "Content-Type": "application/json"}});
                }
                if (seen.length === 2) controller.abort();
              }, controller.signal).catch((error) => {
                if (error.name !== "AbortError") throw error;
              });
              await done;
              return seen;
            }""",
            [site.url, site.key, str(int(before["id"]) - 1)],
        )
    finally:
        context.close()
    assert errors == []
    assert [event["type"] for event in seen] == ["person.created", "person.created"]
    assert seen[0]["data"] == made
    assert seen[1]["data"]["name"] == "Live"
    assert int(seen[1]["id"]) > int(seen[0]["id"])
