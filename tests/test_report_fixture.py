import importlib.util
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "report"


def test_fixture_is_what_its_script_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_fixture", FOLDER / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "incident_run.jsonl"
    module.build().write(out)
    assert out.read_bytes() == (FOLDER / "incident_run.jsonl").read_bytes()
