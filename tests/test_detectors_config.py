"""Detector configuration: files, --set overrides, errors naming the key."""

import pytest

from logbook.detectors import DETECTORS, default_config
from logbook.detectors._config import build_config, parse_set, read_config_file
from logbook.errors import UsageError


def test_defaults_per_entry():
    cfg = default_config()
    assert cfg["loss_spike"].column == "loss" and cfg["loss_spike"].min_ratio == 1.25
    assert cfg["grad_norm_spike"].column == "grad_norm" and cfg["grad_norm_spike"].min_ratio == 3.0
    assert cfg["logz_drift"].magnitude is True
    assert cfg["precursors"].horizon_steps == 1000
    assert set(cfg) == set(DETECTORS) | {"precursors"}


def test_set_values_are_json_or_strings():
    assert parse_set("loss_spike.z=8") == ("loss_spike", "z", 8)
    assert parse_set("stall.enabled=false") == ("stall", "enabled", False)
    assert parse_set("loss_spike.column=my_loss") == ("loss_spike", "column", "my_loss")
    cfg = build_config(None, ["loss_spike.z=8", "grad_norm_spike.min_ratio=4"])
    assert cfg["loss_spike"].z == 8.0
    assert cfg["grad_norm_spike"].min_ratio == 4.0
    assert cfg["grad_norm_spike"].column == "grad_norm"  # the entry's default stays


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["nope.z=1"], "unknown detector 'nope' (valid: loss_spike, grad_norm_spike,"),
        (["loss_spike.foo=1"], "unknown key loss_spike.foo (valid keys of loss_spike: enabled,"),
        (["loss_spike.z=abc"], "bad value for loss_spike.z: Input should be a valid number"),
        (["loss_spike.z=-1"], "bad value for loss_spike.z: Input should be greater than 0"),
        (["loss_spike"], "--set 'loss_spike': expected detector.field=value"),
    ],
)
def test_errors_name_the_key(sets, message):
    with pytest.raises(UsageError) as err:
        build_config(None, sets)
    assert str(err.value).startswith(message)


def test_toml_and_json_files(tmp_path):
    toml = tmp_path / "t.toml"
    toml.write_text("[loss_spike]\nz = 9\n[precursors]\nhorizon_steps = 200\n")
    cfg = build_config(read_config_file(toml), ["loss_spike.window=20"])
    assert (cfg["loss_spike"].z, cfg["loss_spike"].window) == (9.0, 20)
    assert cfg["precursors"].horizon_steps == 200
    js = tmp_path / "t.json"
    js.write_text('{"stall": {"enabled": false}}')
    assert build_config(read_config_file(js))["stall"].enabled is False
    bad = tmp_path / "bad.toml"
    bad.write_text("[loss_spike\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        read_config_file(bad)
    flat = tmp_path / "flat.json"
    flat.write_text('{"z": 3}')
    with pytest.raises(UsageError, match="one table of settings per detector"):
        read_config_file(flat)
    with pytest.raises(UsageError, match="cannot read"):
        read_config_file(tmp_path / "missing.toml")
