"""The import contract's own contract types catch what they exist for (make lint runs them on the tree)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from cortex_site.lint_contracts import DeferredImportsContract, NoModelQueriesContract

FILES = {
    "__init__.py": "",
    "models.py": "class Memory:\n    objects = None\n",
    "services.py": "def memory_create():\n    return 1\n",
    "views.py": """
        from django.shortcuts import get_object_or_404

        from layered.models import Memory
        from layered.services import memory_create


        def good():
            return memory_create()


        def bad(pk):
            first = Memory.objects.get(pk=pk)
            return first, get_object_or_404(Memory, pk=pk)
    """,
    "tasks.py": """
        from typing import TYPE_CHECKING

        from layered.services import memory_create

        if TYPE_CHECKING:
            from layered.services import memory_create as typed


        def run():
            from layered.services import memory_create

            return memory_create()
    """,
}


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[grimp.ImportGraph]:
    package = tmp_path / "layered"
    package.mkdir()
    for name, text in FILES.items():
        (package / name).write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        yield grimp.build_graph("layered", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("layered", None)


def test_an_interface_querying_a_model_breaks_the_contract_at_each_query(graph: grimp.ImportGraph) -> None:
    contract = NoModelQueriesContract(
        name="no queries",
        session_options={},
        contract_options={"packages": ["layered.views"], "model_modules": ["layered.models"]},
    )
    check = contract.check(graph, verbose=False)
    assert not check.kept
    assert [(f.module, f.line) for f in check.metadata["findings"]] == [("layered.views", 13), ("layered.views", 14)]


def test_a_module_that_queries_nothing_keeps_it(graph: grimp.ImportGraph) -> None:
    contract = NoModelQueriesContract(
        name="no queries",
        session_options={},
        contract_options={"packages": ["layered.tasks"], "model_modules": ["layered.models"]},
    )
    assert contract.check(graph, verbose=False).kept


def test_a_module_level_import_of_a_deferred_package_breaks_it_and_function_and_type_imports_do_not(
    graph: grimp.ImportGraph,
) -> None:
    contract = DeferredImportsContract(
        name="deferred", session_options={}, contract_options={"imports": ["layered.tasks -> layered.services"]}
    )
    check = contract.check(graph, verbose=False)
    assert not check.kept
    assert [(f.module, f.line) for f in check.metadata["findings"]] == [("layered.tasks", 4)]
