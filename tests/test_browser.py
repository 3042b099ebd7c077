"""The pages in a real browser: Debian's Chromium, driven by Playwright, against the real server.

Each test does what README's "In the browser" section tells a user to do, records every request
the page makes (none may leave this server), and fails on a Content-Security-Policy violation,
an uncaught error or an unexpected console error.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect, sync_playwright

from .conftest import ServerProcess, start_demo

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# What Chromium needs headless on a machine without a display, a sandbox or the internet
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 20_000
WATCH_CSP = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
});
"""


@pytest.fixture(scope="module")
def chromium(backend):
    if backend != "sqlite":
        pytest.skip("the pages do not depend on the database backend: run once, on SQLite")
    if not Path(CHROMIUM).is_file():
        reason = "Debian's chromium is not installed (apt-get install chromium; .ci/run does)"
        if os.environ.get("REQUIRE_BROWSER_TESTS"):
            pytest.fail(reason)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


def start_server(tmp_path_factory, **settings) -> ServerProcess:
    return start_demo(tmp_path_factory.mktemp("browser"), **settings)


class BlankPage(http.server.BaseHTTPRequestHandler):
    """Another site: an empty page from which a script calls the API."""

    def do_GET(self):
        body = b"<!doctype html><title>another site</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def other_sites():
    """Two other origins on loopback (Chromium lets only local pages call a local server)."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), BlankPage) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{server.server_address[1]}" for server in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site(chromium, tmp_path_factory, other_sites):
    """The demo server, allowing the first of the other sites to call it (CORS)."""
    server = start_server(tmp_path_factory, CORS_ORIGINS=other_sites[0])
    yield server
    server.stop()


def logged(server, text: str, timeout: float = 5) -> bool:
    """Whether the server's stderr (the access log) shows `text` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in list(server.stderr)):
            return True
        time.sleep(0.05)
    return False


class Session:
    """A fresh browser context and page that records requests and errors."""

    def __init__(self, browser, server):
        self.server = server
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        self.context.set_default_timeout(TIMEOUT_MS)
        self.context.add_init_script(WATCH_CSP)
        self.requests: list[str] = []
        self.failed: set[tuple[int, str]] = set()
        self.console: list[str] = []
        self.errors: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.context.on("response", self._response)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _response(self, response):
        if response.status >= 400:
            self.failed.add((response.status, urlsplit(response.url).path))

    def _console(self, message):
        # a failed load is logged without its URL; `failed` has it
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.console.append(message.text)

    def open(self, path: str):
        response = self.page.goto(self.server.url + path)
        assert response.status == 200, path
        return response

    def elsewhere(self) -> list[str]:
        """Requests to any host but the server's."""
        own = urlsplit(self.server.url).netloc
        return [
            url
            for url in self.requests
            if not url.startswith(("data:", "blob:")) and urlsplit(url).netloc != own
        ]

    def check(self, failed=(), logged=()):
        """No request left the server, none failed but `failed` (status, path), no CSP
        violation, no uncaught error, no console error but those containing `logged`."""
        assert self.requests
        assert self.elsewhere() == []
        assert self.failed <= set(failed), self.failed
        assert self.errors == []
        assert not [text for text in self.console if "CSP" in text or "Refused to" in text]
        unexpected = [text for text in self.console if not any(part in text for part in logged)]
        assert unexpected == []

    def close(self):
        self.context.close()


@pytest.fixture
def session(chromium, site):
    session = Session(chromium, site)
    yield session
    session.close()


# Before the key is entered, the explorer's first schema request is refused, and Playground says so
UNAUTHENTICATED = {"failed": {(401, "/graphql")}, "logged": ("Received status code 401",)}


def run_in_playground(page, key: str, query: str):
    """As a user does: the key as JSON under HTTP HEADERS, the query in the left pane, the play
    button; the answer pane."""
    editors = page.locator(".CodeMirror")
    page.locator("#root").get_by_text("HTTP HEADERS").click()
    editors.nth(1).click()
    page.keyboard.insert_text(json.dumps({"X-API-Key": key}))
    editors.first.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(query)
    page.get_by_title("Execute Query (Ctrl-Enter)").click()
    return editors.nth(2)


def test_playground_runs_a_query_with_the_key_from_http_headers(session, site, tmp_path):
    page = session.page
    session.open("/graphql")
    expect(page.locator(".CodeMirror").first).to_be_visible()
    result = run_in_playground(page, site.key, '{ person(id: "1") { name address { city } } }')
    expect(result).to_contain_text('"name": "Ada Lovelace"')
    expect(result).to_contain_text('"city": "London"')
    page.screenshot(path=tmp_path / "playground-result.png")
    # 5. DOCS: the schema's queries and mutations
    page.get_by_text("Docs", exact=True).click()
    expect(page.get_by_text("sendMessage", exact=True)).to_be_visible()
    expect(page.get_by_text("people", exact=True)).to_be_visible()
    page.screenshot(path=tmp_path / "playground-docs.png")
    queries = [url for url in session.requests if urlsplit(url).path == "/graphql"]
    assert len(queries) >= 3  # the page, the schema, the query
    session.check(**UNAUTHENTICATED)


def test_graphiql_runs_a_query_offline_too(chromium, tmp_path_factory, tmp_path):
    server = start_server(tmp_path_factory, EXPLORER="graphiql")
    session = Session(chromium, server)
    try:
        page = session.page
        session.open("/graphql")
        page.locator("#graphiql").get_by_text("Headers", exact=True).click()
        headers = page.locator(".graphiql-editor-tool .CodeMirror").last
        headers.click()
        page.keyboard.insert_text(json.dumps({"X-API-Key": server.key}))
        page.locator(".graphiql-query-editor .CodeMirror").click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text('{ person(id: "1") { name } }')
        page.get_by_role("button", name="Execute query (Ctrl-Enter)").click()
        expect(page.locator(".graphiql-response")).to_contain_text('"name": "Ada Lovelace"')
        page.screenshot(path=tmp_path / "graphiql-result.png")
        session.check(**UNAUTHENTICATED)
    finally:
        session.close()
        server.stop()


def test_docs_authorize_and_try_get_person(session, site, tmp_path):
    page = session.page
    session.open("/docs")
    # 2. Authorize with the key
    page.get_by_role("button", name="Authorize").click()
    modal = page.locator(".modal-ux")
    api_key = modal.locator(".auth-container").filter(has_text="ApiKey")
    api_key.locator("input").fill(site.key)
    api_key.locator("button", has_text="Authorize").click()
    expect(api_key).to_contain_text("Authorized")
    modal.locator("button", has_text="Close").first.click()
    # 3. GET /person/{person_id}: Try it out, 1, Execute
    operation = page.locator("#operations-people-get_person")  # tag, then operationId
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    operation.locator("input[placeholder=person_id]").fill("1")
    operation.get_by_role("button", name="Execute").click()
    # 4. 200 and the person
    live = operation.locator(".live-responses-table tbody")
    expect(live.locator(".response-col_status").first).to_have_text("200")
    expect(live).to_contain_text('"name": "Ada Lovelace"')
    expect(live).to_contain_text("etag")
    page.screenshot(path=tmp_path / "docs-try-it-out.png", full_page=True)
    assert f"{site.url}/person/1" in session.requests
    session.check()


def test_front_page_links_the_explorer_docs_openapi_and_health(session, tmp_path):
    page = session.page
    session.open("/")
    expect(page.get_by_role("heading", name="people-service")).to_be_visible()
    expect(page.locator("pre")).to_contain_text(f"curl -i '{session.server.url}/people?limit=5'")
    page.screenshot(path=tmp_path / "front.png")
    hrefs = page.locator("main a").evaluate_all("links => links.map(a => a.pathname)")
    assert hrefs == ["/graphql", "/docs", "/openapi.json", "/health"]
    page.get_by_role("link", name="Health").click()
    expect(page.locator("body")).to_contain_text('"status":"ok"')
    # Chromium asks for /favicon.ico itself when it shows a JSON document: it is answered
    session.check()


def test_another_site_allowed_by_cors_origins_calls_the_api(session, site, other_sites):
    allowed, not_allowed = other_sites
    page = session.page
    page.goto(allowed)
    answer = page.evaluate(
        """async ([url, key]) => {
            const response = await fetch(url, {headers: {"X-API-Key": key}});
            return {status: response.status, etag: response.headers.get("ETag"),
                    body: await response.json()};
        }""",
        [f"{site.url}/person/1", site.key],
    )
    assert answer["status"] == 200
    assert answer["etag"]  # exposed to the page's script
    assert answer["body"]["name"] == "Ada Lovelace"
    # the custom header made the browser ask first: OPTIONS, without credentials (access log)
    assert logged(site, " - OPTIONS /person/1 204 "), site.stderr[-5:]
    # a site that is not allowed cannot read the API
    page.goto(not_allowed)
    refused = page.evaluate(
        """async (url) => {
            try { await fetch(url, {headers: {"X-API-Key": "ps_x"}}); return "read"; }
            catch (error) { return "refused"; }
        }""",
        f"{site.url}/person/1",
    )
    assert refused == "refused"
