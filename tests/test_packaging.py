"""The package as pyproject.toml declares it: a distribution name of its own, an install
for the audit and replay without the trainers the tests drive, torch pinned."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TEST_ONLY = ("transformers", "accelerate", "tensorboardx", "lightning")


def names(requirements: list[str]) -> list[str]:
    out = []
    for r in requirements:
        name = r.split(";")[0].split("[")[0]
        for sep in "<>=!~ ":
            name = name.split(sep)[0]
        out.append(name.strip().lower())
    return out


def test_distribution_name_and_command():
    from logbook.cli import DISTRIBUTION

    assert PROJECT["name"] == DISTRIBUTION == "trainlogbook"
    assert PROJECT["scripts"] == {"logbook": "logbook.cli:run"}


def test_the_first_install_has_no_test_trainers():
    base = names(PROJECT["dependencies"])
    replay = names(PROJECT["optional-dependencies"]["replay"])
    assert replay == ["torch"]
    assert not set(TEST_ONLY) & set(base + replay)
    assert "torch" not in base  # the audit alone needs no torch


def test_the_test_extra_has_what_the_tests_drive():
    test = names(PROJECT["optional-dependencies"]["test"])
    assert set(TEST_ONLY) | {"pytest", "ruff", "hypothesis", "trainlogbook"} <= set(test)
    assert "trainlogbook[replay]" in PROJECT["optional-dependencies"]["test"]


def test_torch_is_pinned_in_the_install_path():
    assert PROJECT["optional-dependencies"]["replay"] == ["torch==2.13.0"]
    pins = [x for x in (ROOT / "constraints.txt").read_text().splitlines() if x and x[0] != "#"]
    assert pins[0] == "torch==2.13.0"
    # the rest pin the fleet extras and the test server, exactly, and nothing of torch's
    assert all("==" in p and not p.startswith(("torch", "nvidia", "triton")) for p in pins[1:])
    assert {p.split("==")[0] for p in pins[1:]} >= {"ray", "fsspec", "s3fs", "moto"}
    readme = (ROOT / "README.md").read_text()
    assert "pip install -q -c constraints.txt -e '.[replay]' && .venv/bin/logbook detect" in readme
    assert "pip install -q -c constraints.txt -e '.[test]' && .venv/bin/ruff check ." in readme
