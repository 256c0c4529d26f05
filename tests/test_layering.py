"""The folder tree is the architecture, and these rules keep the imports drawing it: datasets plug
into the chat app (a signal, admin extension points, the few-shot source), so no module of
`sessions_app` imports `datasets_app`, not even inside a function (the Agent's string reference
"datasets_app.Dataset" is model state, not an import, and stays); the apps never import the
processes that serve them nor the configuration; the safe defaults import no app; and the chat
app's parts with an entrance are entered through it alone."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from datasets_app import hooks
from datasets_app.models import Dataset, ItemStatus
from datasets_app.services import collect
from sessions_app import engine
from sessions_app.models import Run
from sessions_app.services import examples

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = "datasets_app"
# Apps that plug into the chat app from above, as datasets and evaluation do.
PLUGGED_IN = ("budgets_app", "audit_app", "shares_app", "privacy_app")


def imported(source: str) -> Iterator[tuple[int, str]]:
    """Every module a source imports (line, dotted name), wherever the import statement is,
    and the names given to importlib.import_module or __import__ as plain strings."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and _names_a_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value


def _names_a_module(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")


def offences(source: str, package: str) -> list[tuple[int, str]]:
    return [
        (line, name)
        for line, name in imported(source)
        if name == package or name.startswith(f"{package}.")
    ]


@pytest.mark.parametrize(
    "source",
    [
        "import datasets_app",
        "import datasets_app.models as m",
        "from datasets_app.services import fewshot",
        "from datasets_app import hooks",
        "def f():\n    from datasets_app.admin import collect\n",
        "class A:\n    def m(self):\n        import datasets_app.services.rules\n",
        "import importlib\nimportlib.import_module('datasets_app.services')\n",
    ],
)
def test_the_check_finds_every_kind_of_import(source):
    assert offences(source, FORBIDDEN)


@pytest.mark.parametrize(
    "source",
    [
        "from sessions_app.models import Agent",
        "import datasets_apps_elsewhere",
        "from . import datasets_app",
        'FK = "datasets_app.Dataset"',
    ],
)
def test_the_check_leaves_other_imports_and_strings_alone(source):
    assert not offences(source, FORBIDDEN)


def modules(*packages: str) -> Iterator[tuple[str, Path]]:
    """(dotted name, path) of every module of the packages; migrations name what the code was
    called when they were written, and are left out."""
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                parts = path.relative_to(ROOT).with_suffix("").parts
                yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def imports_of(packages: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for _, path in modules(*packages)
        for package in forbidden
        for line, name in offences(path.read_text(encoding="utf-8"), package)
    ]


def test_project_is_configuration_only():
    files = {p.name for p in (ROOT / "project").glob("*.py")}
    assert files == {"__init__.py", "settings.py", "urls.py", "asgi.py", "api.py"}


@pytest.mark.parametrize(
    "package", ["sessions_app", "datasets_app", "evals_app", *PLUGGED_IN, "safety"]
)
def test_the_apps_never_import_the_processes_that_serve_them(package):
    assert imports_of((package,), ("serving", "project")) == []


def test_evaluation_plugs_in_from_above():
    """The chat and datasets apps name no part of evaluation: it plugs into the engine's start
    and stop (lifespan.on_start, on_stop) from its AppConfig.ready."""
    assert imports_of(("sessions_app", "datasets_app"), ("evals_app",)) == []


def test_budgets_shares_privacy_and_the_audit_log_plug_in_from_above():
    """The chat app names none of them: budgets fill its admission check, budgets and share
    links its settings sections, share links its conversation header, privacy its admin
    actions; the audit log hears its signals. The audit log names no app but the chat app, so
    every other may write to it; privacy, which erases from every app, is named by none."""
    assert imports_of(("sessions_app",), PLUGGED_IN) == []
    assert imports_of(("audit_app",), ("budgets_app", "datasets_app", "evals_app")) == []
    assert imports_of(("audit_app",), ("shares_app", "privacy_app")) == []
    others = ("sessions_app", "datasets_app", "evals_app", "budgets_app", "audit_app")
    assert imports_of((*others, "shares_app"), ("privacy_app",)) == []


def test_safe_defaults_import_no_app():
    assert imports_of(("safety",), ("sessions_app", "datasets_app", "serving", "project")) == []


# Parts of the chat app entered through their package alone: `from sessions_app.usage import
# metrics` takes what the entrance names; `from sessions_app.usage.metrics import ...` reaches in.
ENTERED_AT_THE_TOP = ("sessions_app.accounts", "sessions_app.usage", "sessions_app.agno_import")


def test_parts_are_entered_through_their_package():
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for name, path in modules("sessions_app", "datasets_app", "serving", "project", "bench")
        for line, target in imported(path.read_text(encoding="utf-8"))
        for part in ENTERED_AT_THE_TOP
        if target.startswith(part + ".") and not (name == part or name.startswith(part + "."))
    ]
    assert found == []


def test_no_module_of_the_chat_app_imports_datasets():
    modules = sorted((ROOT / "sessions_app").rglob("*.py"))
    assert len(modules) > 50  # the walk found the app
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in modules
        for line, name in offences(path.read_text(encoding="utf-8"), FORBIDDEN)
    ]
    assert found == []


def test_no_module_of_the_chat_app_imports_evaluation():
    """Evaluation plugs in as datasets do: signals, admin and dashboard extension points."""
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "sessions_app").rglob("*.py"))
        for line, name in offences(path.read_text(encoding="utf-8"), "evals_app")
    ]
    assert found == []


@pytest.fixture
def unplugged():
    """The chat app with no few-shot source, as without datasets; plugged back afterwards."""
    examples.set_example_source(None)
    yield
    hooks.connect()


async def answered(user, text: str) -> Run:
    return await (await engine.start_run(user, text)).wait()


@pytest.mark.django_db(transaction=True)
async def test_with_no_example_source_the_engine_sends_no_examples(
    alice, bob, brief_agent, upstream, unplugged
):
    dataset = await Dataset.objects.acreate(name="greetings")
    await sync_to_async(collect.add_run)(
        dataset, await answered(bob, "hello"), status=ItemStatus.ACCEPTED
    )
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()

    alone = await answered(alice, "hi")
    hooks.connect()
    given = await answered(alice, "hi again")

    assert [m["content"] for m in upstream.requests[-2]["messages"][1:]] == ["hi"]
    assert alone.fewshot_items == []
    # Plugged, the same agent is given the dataset's example.
    assert "hello" in [m["content"] for m in upstream.requests[-1]["messages"]]
    assert len(given.fewshot_items) == 1
