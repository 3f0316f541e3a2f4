"""Import-linter contract types for what plain import contracts cannot say (run by `make lint`).

`interfaces_query_no_models`: the interface packages (views, api, mcp, cli, tasks, …) never
query models themselves — no `Model.objects`, `Model._default_manager` or
`get_object_or_404(Model, …)` on a model imported from the listed model modules. Every
tenant read and write goes through the Principal's selectors and services.

`deferred_imports`: an importer may reach a package only from inside a function body (Celery
tasks import the service they run when they run, so that services can enqueue tasks imported
at module level and the module-level graph still points one way).

Both read the modules' source with `ast`; nothing is imported or executed.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

MANAGERS = {"objects", "_default_manager", "_base_manager"}
SHORTCUTS = {"get_object_or_404", "get_list_or_404"}


@dataclass(frozen=True)
class Finding:
    module: str
    line: int
    text: str


def _source(module: str) -> tuple[Path, ast.Module] | None:
    """The parsed source of a module, found from its root package without importing the module."""
    root, *rest = module.split(".")
    spec = importlib.util.find_spec(root)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if not path.is_file():
        return None
    return path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _within(module: str, packages: set[str]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _modules_of(graph: ImportGraph, packages: list[str]) -> list[str]:
    found: set[str] = set()
    for package in packages:
        found.add(package)
        found |= graph.find_descendants(package)
    return sorted(found)


def _broken(check: ContractCheck) -> None:
    for finding in check.metadata["findings"]:
        output.print_error(f"{finding.module}:{finding.line}: {finding.text}", bold=False)
    output.new_line()


class NoModelQueriesContract(Contract):
    """Interface modules call selectors and services; they do not query models."""

    type_name = "interfaces_query_no_models"

    packages = fields.ListField(subfield=fields.StringField())
    model_modules = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        model_modules = set(cast(list[str], self.model_modules))  # fields hold the parsed values on an instance
        findings: list[Finding] = []
        for module in _modules_of(graph, cast(list[str], self.packages)):
            parsed = _source(module)
            if parsed is None:
                continue
            _, tree = parsed
            models = {
                alias.asname or alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and _within(node.module, model_modules)
                for alias in node.names
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in MANAGERS:
                    if isinstance(node.value, ast.Name) and node.value.id in models:
                        findings.append(Finding(module, node.lineno, f"{node.value.id}.{node.attr}: call a selector or service"))
                elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
                    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                    if name in SHORTCUTS and node.args[0].id in models:
                        findings.append(Finding(module, node.lineno, f"{name}({node.args[0].id}, …): call a selector"))
        return ContractCheck(kept=not findings, metadata={"findings": sorted(findings, key=lambda f: (f.module, f.line))})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _broken(check)


class DeferredImportsContract(Contract):
    """`importer -> imported`: the importer reaches `imported` (or below it) only inside function bodies."""

    type_name = "deferred_imports"

    imports = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        findings: list[Finding] = []
        for rule in cast(list[str], self.imports):
            importer, _, imported = (part.strip() for part in rule.partition("->"))
            parsed = _source(importer)
            if parsed is None:
                findings.append(Finding(importer, 0, "module not found"))
                continue
            _, tree = parsed
            for node in _module_level(tree):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                for name in names:
                    if _within(name, {imported}):
                        findings.append(
                            Finding(importer, node.lineno, f"imports {name} at module level; import it where it is used")
                        )
        return ContractCheck(kept=not findings, metadata={"findings": sorted(findings, key=lambda f: (f.module, f.line))})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _broken(check)


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """Statements that run at import: the module body and the bodies of its ifs, trys and classes."""
    found: list[ast.stmt] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue  # never runs: imports for the type checker only
        found.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt) and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    pending.append(child)
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    pending.extend(handler.body)
    return found
