"""The front page, the API docs, the explorer's settings and the static files they load."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from urllib.parse import urljoin

import pytest

from people_service import ConfigError
from people_service.rest.ops import EXAMPLE
from people_service.web.pages import VENDOR

from .conftest import ROOT, close_app, make_app

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
PAGES = ("/graphql", "/", "/docs")


class Page(HTMLParser):
    """The URLs a page loads, and its scripts."""

    def __init__(self, html: str):
        super().__init__()
        self.loads: list[str] = []
        self.links: list[str] = []
        self.scripts: list[dict] = []
        self.handlers: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.handlers += [name for name in attrs if name.startswith("on")]
        if tag == "script":
            self.scripts.append(attrs)
        if tag in ("script", "img") and attrs.get("src"):
            self.loads.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.loads.append(attrs["href"])
        if tag == "a":
            self.links.append(attrs["href"])


def page(client, path):
    response = client.get(path, headers={"Accept": BROWSER})
    assert response.status_code == 200, path
    return response, Page(response.get_data(as_text=True))


def test_front_page_names_the_service_and_links_everything(client):
    response, html = page(client, "/")
    text = response.get_data(as_text=True)
    assert "<h1>people-service</h1>" in text
    assert html.links == ["/graphql", "/docs", "/openapi.json", "/health"]
    # the example names the URL the page was asked for
    assert "curl -i &#39;http://localhost/people?limit=5&#39;" in text


def test_front_page_shows_the_first_curl_example_of_the_readme():
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```sh\n(?:#.*\n)*(curl .*)\n", readme).group(1)
    assert first == EXAMPLE.format(base="http://127.0.0.1:8080")


def test_front_page_for_programs_is_json_with_the_same_links(client):
    response = client.get("/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    body = response.json
    assert body["name"] == "people-service"
    assert body["version"]
    assert body["links"] == {
        "graphql": "/graphql",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "health": "/health",
    }
    for path in body["links"].values():
        assert client.get(path, headers={"Accept": BROWSER}).status_code == 200, path


def test_front_page_is_open_and_counts_against_the_address(tmp_path):
    app = make_app(tmp_path, ANONYMOUS_RATE_LIMIT="3/minute")
    try:
        client = app.test_client()
        # no credentials, or wrong ones: the page is still served, charged to the address
        for headers in ({}, {"X-API-Key": "ps_wrong"}, {"Accept": BROWSER}):
            response = client.get("/", headers=headers)
            assert response.status_code == 200
            assert response.headers["X-RateLimit-Limit"] == "3"
        refused = client.get("/")
        assert refused.status_code == 429
        assert refused.content_type == "application/problem+json"
    finally:
        close_app(app)


def test_front_page_without_an_explorer_links_none(tmp_path):
    app = make_app(tmp_path, EXPLORER="none")
    try:
        _, html = page(app.test_client(), "/")
        assert html.links == ["/docs", "/openapi.json", "/health"]
    finally:
        close_app(app)


def test_docs_page_is_swagger_ui_over_the_openapi_document(client):
    response, html = page(client, "/docs")
    assert 'data-openapi="/openapi.json"' in response.get_data(as_text=True)
    assert html.loads == [  # relative to the page: no mount prefix in it
        "static/vendor/swagger-ui-dist@5.35.0/swagger-ui.css",
        "static/vendor/swagger-ui-dist@5.35.0/favicon-32x32.png",
        "static/vendor/swagger-ui-dist@5.35.0/swagger-ui-bundle.js",
        html.loads[-1],
    ]
    assert html.loads[-1].startswith("static/pages/docs.js?v=")
    spec = client.get("/openapi.json").json
    assert spec["components"]["securitySchemes"] == {
        "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        "Bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
    }


@pytest.mark.parametrize("explorer", ["playground", "graphiql"])
def test_every_file_a_page_loads_is_served_from_this_server(tmp_path, explorer):
    app = make_app(tmp_path, EXPLORER=explorer)
    try:
        client = app.test_client()
        for path in PAGES:
            _, html = page(client, path)
            assert html.loads, path
            for url in html.loads:
                if url.startswith("data:"):
                    continue
                url = urljoin(path, url)  # relative to the page: no mount prefix in it
                assert url.startswith("/static/"), url
                response = client.get(url)
                assert response.status_code == 200, url
                assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
                assert response.headers["X-Content-Type-Options"] == "nosniff"
                if url.split("?")[0].endswith(".js"):
                    assert response.mimetype in ("text/javascript", "application/javascript")
                response.close()
    finally:
        close_app(app)


def test_pages_run_no_inline_script(tmp_path):
    for explorer in ("playground", "graphiql"):
        (tmp_path / explorer).mkdir()
        app = make_app(tmp_path / explorer, EXPLORER=explorer)
        try:
            for path in PAGES:
                _, html = page(app.test_client(), path)
                assert all(script.get("src") for script in html.scripts), path
                assert html.handlers == [], path
        finally:
            close_app(app)


def test_html_pages_carry_a_content_security_policy_and_refuse_framing(client):
    for path in PAGES:
        response = client.get(path, headers={"Accept": BROWSER})
        policy = dict(
            part.strip().split(" ", 1)
            for part in response.headers["Content-Security-Policy"].split(";")
        )
        assert policy["default-src"] == "'none'", path
        assert policy["script-src"] == "'self'", path
        assert policy["connect-src"] == "'self'", path
        assert policy["frame-ancestors"] == "'none'", path
        assert policy["base-uri"] == "'none'", path
        assert response.headers["X-Frame-Options"] == "DENY", path
        assert response.headers["Referrer-Policy"] == "no-referrer", path
    # inline styles only where React sets them
    front = client.get("/", headers={"Accept": BROWSER})
    assert "'unsafe-inline'" not in front.headers["Content-Security-Policy"]


def test_json_answers_carry_no_page_headers(client):
    for path in ("/", "/health", "/openapi.json"):
        response = client.get(path)
        assert "Content-Security-Policy" not in response.headers, path
        assert "X-Frame-Options" not in response.headers, path


def test_our_own_files_are_revalidated_without_their_hash(client):
    response = client.get("/static/pages/front.css")
    response.close()
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-cache"
    again = client.get(
        "/static/pages/front.css", headers={"If-None-Match": response.headers["ETag"]}
    )
    again.close()
    assert again.status_code == 304


@pytest.mark.parametrize(
    "path",
    [
        "/static/",
        "/static/missing.js",
        "/static/../config.py",
        "/static/%2e%2e/config.py",
        "/static/vendor/..%2f..%2fconfig.py",
        "/static/pages/%00.js",
        "/static/" + "a/" * 500 + "x.js",
    ],
)
def test_static_files_outside_the_folder_are_404(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.content_type == "application/problem+json"


def test_vendored_files_are_those_the_manifest_names_with_their_licences():
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    assert set(manifest) == {
        "graphql-playground-react",
        "graphiql",
        "react",
        "react-dom",
        "swagger-ui-dist",
    }
    on_disk = {str(path.relative_to(VENDOR)) for path in VENDOR.rglob("*") if path.is_file()} - {
        "manifest.json"
    }
    listed = set()
    for name, package in manifest.items():
        folder = VENDOR / f"{name}@{package['version']}"
        assert (folder / "LICENSE").is_file(), name
        assert package["license"] in ("MIT", "Apache-2.0"), name
        assert package["integrity"].startswith("sha512-"), name
        for file, digest in package["files"].items():
            listed.add(f"{name}@{package['version']}/{file}")
            assert hashlib.sha256((folder / file).read_bytes()).hexdigest() == digest, file
    assert on_disk == listed


def test_the_vendoring_script_pins_what_the_manifest_holds():
    script = (ROOT / "tools" / "vendor-assets.sh").read_text()
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    for name, package in manifest.items():
        assert f'"{name}@{package["version"]} ' in script, name


def test_explorer_cdn_is_an_npm_cdn_root_for_both_explorers(tmp_path):
    cdn = "https://cdn.example.org/npm"
    for explorer, expected in (
        ("playground", "graphql-playground-react@1.7.28/build/static/js/middleware.js"),
        ("graphiql", "graphiql@4.1.2/dist/index.umd.js"),
    ):
        (tmp_path / explorer).mkdir()
        app = make_app(tmp_path / explorer, EXPLORER=explorer, EXPLORER_CDN=cdn + "/")
        try:
            response, html = page(app.test_client(), "/graphql")
            assert f"{cdn}/{expected}" in html.loads
            assert not [url for url in html.loads if "static/vendor/" in url]
            policy = response.headers["Content-Security-Policy"]
            assert "script-src 'self' https://cdn.example.org;" in policy
            assert "connect-src 'self';" in policy  # queries still go only to this server
        finally:
            close_app(app)


@pytest.mark.parametrize(
    "value",
    [
        "javascript:alert(1)",
        'https://cdn.example.org/" onload="x',
        "https://cdn.example.org/npm; script-src *",
        "https://cdn example.org",
        "ftp://cdn.example.org",
        "https://cdn.example.org/<script>",
    ],
)
def test_explorer_cdn_that_could_break_the_page_is_refused(tmp_path, value):
    with pytest.raises(ConfigError, match="EXPLORER_CDN"):
        make_app(tmp_path, EXPLORER_CDN=value)


@pytest.mark.parametrize("explorer", ["playground", "graphiql"])
def test_a_script_name_header_under_gunicorn_never_reaches_a_later_page(tmp_path, explorer):
    """gunicorn turns a `SCRIPT_NAME` request header (from a peer in forwarded_allow_ips,
    loopback by default) into environ SCRIPT_NAME: a page rendered for that request and kept
    for every later browser would load its scripts from that host. Pages hold no prefix."""
    import sys

    import requests

    from .conftest import database
    from .test_wsgi_servers import WSGIServer

    pytest.importorskip("gunicorn")
    command = [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:{port}", "app:app"]
    settings = {"PEOPLE_SERVICE_EXPLORER": explorer}
    with WSGIServer(command, database(tmp_path), settings) as server:
        evil = {"Accept": BROWSER, "SCRIPT_NAME": "//evil.example"}
        for path in PAGES:  # the first visit of each page, from the attacker
            requests.get(server.url + path, headers=evil, timeout=30)
        for path in PAGES:
            answer = requests.get(server.url + path, headers={"Accept": BROWSER}, timeout=30)
            assert answer.status_code == 200, path
            assert "evil.example" not in answer.text, path
            html = Page(answer.text)
            for url in html.loads:  # every asset from this server, under the page's own path
                if not url.startswith("data:"):
                    assert not url.startswith(("/", "http:", "https:")), url
                    asset = requests.get(urljoin(server.url + path, url), timeout=30)
                    assert asset.status_code == 200, url
