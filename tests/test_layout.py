"""The folder tree is the architecture: these rules keep the imports drawing it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Parts of the chat app entered through their package alone.
ENTERED_ONLY_AT_THE_TOP = (
    "sessions_app.accounts",
    "sessions_app.usage",
    "sessions_app.agno_import",
)


def modules(*packages: str) -> Iterator[tuple[str, Path]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue  # a migration names what the code was called when it was written
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path


def imported(path: Path, *, names: bool = True) -> Iterator[tuple[int, str]]:
    """Every module an import statement names, at any depth of the file (inside functions too),
    and with `names` what a from-import takes from it, as `module.name`."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            if names:
                for alias in node.names:
                    yield node.lineno, f"{node.module}.{alias.name}"


def offences(packages: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for _, path in modules(*packages)
        for line, name in imported(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


def test_project_is_configuration_only():
    files = {p.name for p in (ROOT / "project").glob("*.py")}
    assert files == {"__init__.py", "settings.py", "urls.py", "asgi.py", "api.py"}


@pytest.mark.parametrize("package", ["sessions_app", "datasets_app", "safety"])
def test_the_apps_never_import_the_processes_that_serve_them(package):
    assert offences((package,), ("serving", "project")) == []


def test_safe_defaults_import_no_app():
    assert offences(("safety",), ("sessions_app", "datasets_app", "serving", "project")) == []


def test_parts_are_entered_through_their_package():
    found = []
    for name, path in modules("sessions_app", "datasets_app", "serving", "project", "bench"):
        # Modules only: `from sessions_app.usage import metrics` takes what the entrance names.
        for line, target in imported(path, names=False):
            for part in ENTERED_ONLY_AT_THE_TOP:
                inside = name == part or name.startswith(part + ".")
                if target.startswith(part + ".") and not inside:
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert found == []
