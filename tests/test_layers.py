"""The shape of the code: one direction of imports, SQL only in the store, config documented."""

from __future__ import annotations

import ast
import re

from people_service import config

from .conftest import ROOT

PACKAGE = ROOT / "people_service"
STORE = sorted((ROOT / "people_service" / "store").glob("*.py"))
FLASK_FREE = [
    PACKAGE / name for name in ("service.py", "schemas.py", "errors.py", "usage.py", "config.py")
] + STORE


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


def test_domain_modules_never_import_flask():
    for path in FLASK_FREE:
        found = {i for i in imports_of(path) if i.split(".")[0] in ("flask", "flask_limiter")}
        assert not found, (path, found)


def test_rest_and_graphql_never_import_each_other_or_the_store():
    for package, other in (("rest", "graphql"), ("graphql", "rest")):
        for path in (PACKAGE / package).glob("*.py"):
            names = imports_of(path)
            assert not any(other in name.split(".") for name in names if name.startswith(".")), path
            local = {name.lstrip(".").split(".")[0] for name in names if name.startswith(".")}
            assert "store" not in local, path


def test_service_and_store_do_not_reach_up():
    rules = [(path, ("service", "auth", "web", "rest", "graphql")) for path in STORE]
    rules.append((PACKAGE / "service.py", ("auth", "web", "rest", "graphql", "limits")))
    for path, forbidden in rules:
        names = imports_of(path)
        local = {n.lstrip(".").split(".")[0] for n in names if n.startswith(".")}
        assert not local & set(forbidden), (path, local & set(forbidden))


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
        assert re.search(rf"# .+\n\s+\"{name}\":", source), f"{name} has no comment"
    rows = re.findall(r"^\| `PEOPLE_SERVICE_(\w+)` \|", readme, flags=re.M)
    assert sorted(rows) == sorted(config.DEFAULTS)


def test_modules_open_with_a_one_sentence_docstring():
    for path in [*PACKAGE.rglob("*.py"), ROOT / "app.py"]:
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        assert docstring, path
        assert docstring.count(". ") == 0 and docstring.endswith("."), (path, docstring)


def test_schema_graphql_is_the_only_sdl():
    for path in PACKAGE.rglob("*.py"):
        assert "type Query" not in path.read_text(), path
