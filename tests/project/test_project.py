"""The set-up files agree with each other, so both install routes give the same environment."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock line is not an exact pin: {line}"
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_every_dependency_is_pinned_in_the_lock() -> None:
    project = _pyproject()["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra if not r.startswith("sessionstore")}
    missing = wanted - set(_lock())
    assert not missing, f"not pinned in requirements.lock: {sorted(missing)}"


def test_lock_satisfies_exact_pins_in_pyproject() -> None:
    pins = _lock()
    for extra in _pyproject()["project"]["optional-dependencies"].values():
        for req in extra:
            if "==" in req:
                assert pins[_name(req)] == req.split("==")[1], req


def test_environment_yml_matches_pyproject() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    python = next(d for d in deps if isinstance(d, str) and d.startswith("python"))
    requires = _pyproject()["project"]["requires-python"]
    # conda's Python is the notebooks' kernel version (their outputs were made on it), inside
    # the supported range, which starts there.
    assert python == "python=3.11" and ">=3.11" in requires
    assert SpecifierSet(requires).contains("3.11.0")
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert "-c requirements.lock" in pip
    assert "-e .[dev]" in pip  # same extras as the Makefile installs


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^make test$", ci, re.M)
    assert "make test" in readme and "make lab" in readme
    assert '-e ".[dev]"' in makefile and "-c requirements.lock" in makefile
    assert "--ip=127.0.0.1" in makefile


def test_package_is_typed() -> None:
    assert (ROOT / "sessionstore" / "py.typed").exists()


def test_make_installs_the_build_requirements_it_builds_with() -> None:
    """The Makefile builds the package without pip's isolated build environment (one install
    fewer), so its own first step must install what the build system requires."""
    install = (ROOT / "Makefile").read_text().split("define install_into", 1)[1]
    install = install.split("endef", 1)[0]
    assert "--no-build-isolation" in install
    first = install.strip().splitlines()[0]
    for requirement in _pyproject()["build-system"]["requires"]:
        assert f'"{requirement}"' in first, (requirement, first)


def test_make_lets_python_write_the_bytecode_it_compiles() -> None:
    """Under ``make``, a PYTHONDONTWRITEBYTECODE from the environment is not passed on: every
    process of the suite would otherwise compile again every module it imports."""
    probe = 'probe: ; @echo "[$$PYTHONDONTWRITEBYTECODE]"'
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", probe, "probe"],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout
