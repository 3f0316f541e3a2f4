"""The README's test command and CI's stay the same command."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    ci_commands = [
        line.strip()
        for line in ci.splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert ci_commands == ["make test"]
    head = readme.split("\n## ", 1)[0]
    assert "make run" in head
    assert "make test" in head


def test_makefile_test_target_runs_the_whole_suite() -> None:
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "cortex_site.runner test" in test_recipe
    assert "-m" not in test_recipe.split("cortex_site.runner test", 1)[1]  # no marker filter: slow tests run too
