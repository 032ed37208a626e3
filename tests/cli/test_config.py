"""The shared config machinery (``proxydiag.settings``) and one ``--config`` file for diagnose
and compare."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from proxydiag.diagnose.config import load_config as load_diagnose
from proxydiag.errors import ConfigError
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.config import load_config as load_compare
from proxydiag.metrics import AliasTable
from proxydiag.settings import check_ranges, override, ranged, read_toml

SHARED = """\
[scaler]
window_steps = 80

[mismatch]
prob_diff_bound = 0.02

[compare]
n_boot = 50
floor_trend = 0.2
"""


def test_one_file_serves_diagnose_and_compare(tmp_path: Path) -> None:
    path = tmp_path / "proxydiag.toml"
    path.write_text(SHARED)
    diag = load_diagnose(path)
    assert (diag.scaler.window_steps, diag.mismatch.prob_diff_bound) == (80, 0.02)
    cmp = load_compare(path)
    assert (cmp.n_boot, cmp.floor_trend, cmp.resolution_points) == (50, 0.2, 2000)
    # compare ignores every diagnose table, including a [diagnose] one
    path.write_text(SHARED + "[diagnose]\nanything = 1\n")
    assert load_compare(path).n_boot == 50


def test_each_loader_still_rejects_unknown_keys_in_its_own_section(tmp_path: Path) -> None:
    path = tmp_path / "shared.toml"
    path.write_text(SHARED + "window_stepz = 3\n")  # lands in [compare]
    with pytest.raises(
        ConfigError, match=r"shared\.toml: unknown key compare\.window_stepz; known: "
    ):
        load_compare(path)
    assert load_diagnose(path).scaler.window_steps == 80  # not diagnose's table
    path.write_text("[scaler]\nwindow_stepz = 3\n[compare]\nn_boot = 50\n")
    with pytest.raises(
        ConfigError, match=r"shared\.toml: unknown key scaler\.window_stepz; known: "
    ):
        load_diagnose(path)
    assert load_compare(path).n_boot == 50
    path.write_text("[scalerr]\nwindow_steps = 3\n")
    with pytest.raises(ConfigError, match=r"shared\.toml: unknown section \[scalerr\]"):
        load_diagnose(path)


def test_read_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[compare]\nn_boot = 50\nfloor_trend =\n")
    with pytest.raises(
        ConfigError, match=r"broken\.toml:3: invalid TOML \(.*\); fix the file$"
    ) as info:
        read_toml(path)
    assert "\n" not in str(info.value)
    with pytest.raises(
        ConfigError, match=r"absent\.toml: config file not found; check the --config path"
    ):
        load_diagnose(tmp_path / "absent.toml")
    with pytest.raises(
        ConfigError, match=r"absent\.toml: alias file not found; check the --aliases path"
    ):
        AliasTable.load(tmp_path / "absent.toml")


@dataclass(frozen=True)
class _Params:
    high_score: float = ranged(0.6, lo=0.0, hi=1.0)
    low_score: float = ranged(0.3, lo=0.0, hi="high_score")  # bounded by another field
    window_steps: int = ranged(40, lo=2, hi=1000)
    names: tuple[str, ...] = ("loss",)

    def __post_init__(self) -> None:
        check_ranges(self, section="demo")


def test_ranges_come_from_field_metadata_and_the_message_gives_the_range() -> None:
    assert _Params().window_steps == 40
    with pytest.raises(
        ConfigError,
        match=r"^\[demo\] window_steps = 1 is out of range; use a value in \[2, 1000\]$",
    ):
        _Params(window_steps=1)
    with pytest.raises(
        ConfigError,
        match=r"\[demo\] low_score = 0\.7 is out of range; use a value in \[0\.0, 0\.6\]",
    ):
        _Params(low_score=0.7)
    with pytest.raises(
        ConfigError,
        match=r"\[compare\] diverged_score = 0\.7 is out of range; use a value in \[0\.0, 0\.6\]",
    ):
        FidelityConfig(diverged_score=0.7)


def test_override_checks_keys_types_and_ranges_with_the_origin() -> None:
    got = override(
        _Params(), {"window_steps": 80, "names": ["kl"]}, section="demo", origin="f.toml"
    )
    assert (got.window_steps, got.names) == (80, ("kl",))
    with pytest.raises(ConfigError, match=r"^f\.toml: demo\.window_steps must be int, not 2\.5$"):
        override(_Params(), {"window_steps": 2.5}, section="demo", origin="f.toml")
    with pytest.raises(ConfigError, match=r"^f\.toml: demo\.names must be a list of strings$"):
        override(_Params(), {"names": "kl"}, section="demo", origin="f.toml")
    with pytest.raises(
        ConfigError, match=r"^f\.toml: \[demo\] window_steps = 5000 is out of range"
    ):
        override(_Params(), {"window_steps": 5000}, section="demo", origin="f.toml")
    cfg = FidelityConfig()
    assert override(cfg, {"whole_run_tests": True}, section="compare", origin="f").whole_run_tests
    with pytest.raises(
        ConfigError, match=r"^f\.toml: compare\.whole_run_tests must be true or false, not 1$"
    ):
        override(cfg, {"whole_run_tests": 1}, section="compare", origin="f.toml")
    with pytest.raises(ConfigError, match=r"^f\.toml: compare\.n_boot must be a number, not True"):
        override(cfg, {"n_boot": True}, section="compare", origin="f.toml")
