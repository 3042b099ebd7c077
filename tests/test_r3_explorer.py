"""The explorers in real Chromium at the DEFAULT rate limits, as a new user meets them."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from .conftest import ServerProcess, database
from .test_browser import Session, chromium  # noqa: F401 (a fixture)

RELOADS = 4


@pytest.fixture(params=["playground", "graphiql"])
def default_server(request, chromium, tmp_path_factory):  # noqa: F811
    """The demo with every setting at its default but the explorer."""
    env = {"PEOPLE_SERVICE_EXPLORER": request.param}
    server = ServerProcess(database(tmp_path_factory.mktemp("explorer")), env=env).start()
    server.key = server.wait_for_output(lambda line: line.startswith("ps_"))
    server.explorer = request.param
    yield server
    server.stop()


def statuses(session) -> list[int]:
    return [status for status, path in session.answers if path == "/graphql"]


def test_the_explorer_says_how_to_add_a_key_and_reloads_without_429(chromium, default_server):  # noqa: F811
    server = default_server
    session = Session(chromium, server)
    session.answers = []
    session.context.on(
        "response",
        lambda response: session.answers.append(
            (response.status, response.url.split(server.url, 1)[-1].split("?")[0])
        ),
    )
    page = session.page
    try:
        session.open("/graphql")
        hint = page.locator("#key-hint")
        # 1. without a key: the schema request is refused, and the page says what to do
        expect(hint).to_be_visible()
        expect(hint).to_contain_text('{"X-API-Key": "your key"}')
        assert 401 in statuses(session)
        # 2. the key in the headers editor, then a query
        if server.explorer == "playground":
            page.locator("#root").get_by_text("HTTP HEADERS").click()
            editors = page.locator(".CodeMirror")
            editors.nth(1).click()
            page.keyboard.insert_text(json.dumps({"X-API-Key": server.key}))
            editors.first.click()
            page.keyboard.press("Control+A")
            page.keyboard.insert_text('{ person(id: "1") { name } }')
            page.get_by_title("Execute Query (Ctrl-Enter)").click()
            expect(editors.nth(2)).to_contain_text('"name": "Ada Lovelace"')
        else:
            page.locator("#graphiql").get_by_text("Headers", exact=True).click()
            page.locator(".graphiql-editor-tool .CodeMirror").last.click()
            page.keyboard.insert_text(json.dumps({"X-API-Key": server.key}))
            page.locator(".graphiql-query-editor .CodeMirror").click()
            page.keyboard.press("Control+A")
            page.keyboard.insert_text('{ person(id: "1") { name } }')
            page.get_by_role("button", name="Execute query (Ctrl-Enter)").click()
            expect(page.locator(".graphiql-response")).to_contain_text('"name": "Ada Lovelace"')
        expect(hint).to_be_hidden()
        # 3. reloads: each loads the schema again, with the key the explorer kept (Playground)
        for _ in range(RELOADS):
            before = len(session.answers)
            page.reload()
            if server.explorer == "playground":
                page.wait_for_function(
                    "n => window.performance.getEntriesByType('resource')"
                    ".filter(e => e.name.endsWith('/graphql')).length >= 1",
                    arg=1,
                )
                expect(page.locator(".CodeMirror").first).to_be_visible()
                page.wait_for_timeout(500)
            else:
                expect(page.locator(".graphiql-query-editor")).to_be_visible()
            assert len(session.answers) > before
        assert 429 not in statuses(session), session.answers
        introspections = statuses(session).count(200)
        assert introspections >= 2, session.answers
        # what all of it cost: at most 100 an introspection (SPEC 11a) of the key's 600 a
        # minute, the query and this one 2 each
        me = session.context.request.get(
            f"{server.url}/graphql?query={{me{{name}}}}", headers={"X-API-Key": server.key}
        )
        assert me.status == 200
        assert int(me.headers["x-ratelimit-remaining"]) >= 600 - 100 * introspections - 4
        session.check(failed={(401, "/graphql")}, logged=("401",))
    finally:
        session.close()
