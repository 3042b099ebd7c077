"""waitress is used through its public options only, in any 3.x release from 3.0.2 on."""

from __future__ import annotations

import ast
from importlib.metadata import requires, version
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "people_service"
INTERNALS = ("waitress.channel", "waitress.task", "waitress.server", "waitress.wasyncore")


def test_waitress_is_required_as_a_range_and_installed_within_it():
    assert "waitress<4,>=3.0.2" in requires("people-service")
    major, minor, patch = (int(part) for part in version("waitress").split(".")[:3])
    assert major == 3 and (minor, patch) >= (0, 2)


def test_no_module_imports_waitress_internals_or_reads_their_state():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                names = []
            assert not any(name.startswith(INTERNALS) for name in names), (path, names)
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("_map", "channel_class", "task_class"), path
