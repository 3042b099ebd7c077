"""The shape of the code (one direction of imports, SQL only in the store, config documented)
and of the docs (a short README, links that lead somewhere)."""

from __future__ import annotations

import ast
import re

from people_service import config

from .conftest import ROOT

PACKAGE = ROOT / "people_service"
STORE = sorted((ROOT / "people_service" / "store").glob("*.py"))
# The domain: what REST, GraphQL and the CLI share. None of it knows about HTTP.
DOMAIN = [
    PACKAGE / name
    for name in (
        "service.py",
        "credentials.py",
        "passwords.py",
        "idempotency.py",
        "transfer.py",
        "schemas.py",
        "errors.py",
        "config.py",
        "events.py",
        "feed.py",
        "webhooks.py",
        "delivery.py",
    )
] + STORE
HTTP_LIBRARIES = ("flask", "flask_limiter", "flask_cors", "werkzeug", "ariadne", "waitress")
# What the store may import of the package: itself and the error hierarchy, nothing above.
STORE_MAY_IMPORT = {"store", "errors"}


def imports_of(path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            names.add(prefix)
            names |= {f"{prefix}.{alias.name}" if node.level else prefix for alias in node.names}
    return names


def local_modules(path) -> set[str]:
    """The package's modules that `path` imports (first name below people_service)."""
    inside = list(path.parent.relative_to(PACKAGE).parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = inside[: len(inside) - (node.level - 1)]
        module = [part for part in (node.module or "").split(".") if part]
        targets = [base + module] if module else [base + [alias.name] for alias in node.names]
        found |= {target[0] for target in targets if target}
    return found


def test_domain_modules_import_no_http_library():
    for path in DOMAIN:
        found = {i for i in imports_of(path) if i.split(".")[0] in HTTP_LIBRARIES}
        found = {i for i in found if not i.startswith("werkzeug.security")}  # no HTTP in it
        assert not found, (path, found)


def test_the_store_imports_nothing_above_it():
    for path in STORE:
        assert local_modules(path) <= STORE_MAY_IMPORT, (path, local_modules(path))


def test_the_domain_never_imports_the_http_layer():
    for path in DOMAIN:
        assert not local_modules(path) & {"web", "rest", "graphql", "cli"}, path


def module_imports() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports when it is loaded (its
    top-level statements; an import inside a function runs later, when a cycle is harmless)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                found |= {t for t in (target, *(f"{target}.{a.name}" for a in node.names))}
        graph[name] = {target for target in found & set(names) if target != name}
    return graph


def test_no_import_cycle_among_the_modules():
    graph, done = module_imports(), set()

    def visit(name, path):
        assert name not in path, " -> ".join([*path, name])
        if name not in done:
            for target in graph[name]:
                visit(target, [*path, name])
            done.add(name)

    for name in graph:
        visit(name, [])


def test_modules_stay_small():
    for path in PACKAGE.rglob("*.py"):
        assert path.read_text().count("\n") <= 450, path


def test_rest_and_graphql_never_import_each_other_or_the_store():
    for package, other in (("rest", "graphql"), ("graphql", "rest")):
        for path in (PACKAGE / package).glob("*.py"):
            names = imports_of(path)
            assert not any(other in name.split(".") for name in names if name.startswith(".")), path
            assert "store" not in local_modules(path), path


SQL = re.compile(r"\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE TABLE)\b")


def test_sql_lives_only_in_the_store():
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "store":
            continue
        assert not SQL.search(path.read_text()), path


def test_every_setting_has_a_commented_default_and_a_readme_row():
    readme = (ROOT / "README.md").read_text()
    source = (PACKAGE / "config.py").read_text()
    for name in config.DEFAULTS:
        assert f"| `PEOPLE_SERVICE_{name}` |" in readme, name
        assert re.search(rf'^    "{name}": .+  # \S', source, re.M), f"{name} has no comment"
    rows = re.findall(r"^\| `PEOPLE_SERVICE_(\w+)` \|", readme, flags=re.M)
    assert sorted(rows) == sorted(config.DEFAULTS)


def test_schema_graphql_is_the_only_sdl():
    for path in PACKAGE.rglob("*.py"):
        assert "type Query" not in path.read_text(), path


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path) -> set[str]:
    """The fragment of each heading, as GitHub makes it."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_at_most_450_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 450


def test_every_relative_link_of_the_readme_and_docs_leads_to_a_file_and_heading():
    checked = 0
    for document in DOCUMENTS:
        for target in LINK.findall(document.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, fragment = target.partition("#")
            path = (document.parent / file).resolve() if file else document
            assert path.exists(), (document.name, target)
            if fragment:
                assert fragment in anchors(path), (document.name, target)
            checked += 1
    assert checked >= 20


def test_the_readme_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert f"(docs/{page.name}" in readme, page.name
