"""One set of settings for the whole pipeline: the same ``--config`` file changes what
``diagnose``, ``compare``, ``report``, ``dashboard``, ``watch`` and the fleet commands say
alike, and an :class:`~proxydiag.pipeline.Analysis` diagnoses each run once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxydiag.cli import main
from proxydiag.errors import ConfigError
from proxydiag.ingest import read_run
from proxydiag.pipeline import Analysis, Settings
from tests._paths import SAMPLES

GROUP = SAMPLES / "precision-gradual-climb"
FULL = GROUP / "precision-gradual-climb-full-s0"
PROXY = GROUP / "precision-gradual-climb-proxy-e8"
#: every mismatch bound out of reach: the precision fault of this group is not seen
QUIET = """
[mismatch]
min_fold = 1000000.0
strong_fold = 1000000.0
shift_fold = 1000000.0
z_min = 1000.0
prob_diff_bound = 1.0
kl_bound = 1000.0
chi2_bound = 1000000.0
corr_bound = -1.0
is_mean_low = 0.0
is_mean_high = 1000000.0
ess_bound = 0.0

[compare]
"""


@pytest.fixture
def quiet(tmp_path: Path) -> Path:
    path = tmp_path / "quiet.toml"
    path.write_text(QUIET)
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    assert int(info.value.code or 0) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _labels(text: str) -> list[str]:
    return [json.loads(line)["label"] for line in text.splitlines() if line.startswith("{")]


def test_settings_read_every_section_and_name_the_file_on_a_bad_key(
    quiet: Path, tmp_path: Path
) -> None:
    s = Settings.load(quiet)
    assert s.diagnose.mismatch.min_fold == 1e6 and s.path == str(quiet)
    assert s.digest != Settings().digest and Settings.load(None) == Settings()
    bad = tmp_path / "bad.toml"
    bad.write_text("[compare]\nno_such_knob = 1\n")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        Settings.load(bad)


def test_an_analysis_diagnoses_each_run_once_and_compares_with_its_settings(quiet: Path) -> None:
    full, proxy = read_run(FULL), read_run(PROXY)
    default, tuned = Analysis(), Analysis(Settings.load(quiet))
    assert default.diagnose(full) is default.diagnose(full)
    assert default.diagnose(full).label == "precision_fault"
    assert tuned.diagnose(full).label == "healthy"
    c = tuned.compare([full], proxy)
    assert c.faults.full["label"] == "healthy"  # the fault match used the tuned diagnoses
    assert default.compare([full], proxy).faults.full["label"] == "precision_fault"


@pytest.mark.slow
def test_the_same_file_changes_every_command_alike(
    quiet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = ["--config", str(quiet)]
    # diagnose
    assert _labels(cli(capsys, "diagnose", str(FULL), "-f", "json")) == ["precision_fault"]
    assert _labels(cli(capsys, "diagnose", str(FULL), "-f", "json", *cfg)) == ["healthy"]
    # compare: the fault match diagnoses with the file's detector settings
    pair = ["compare", "--full", str(FULL), "--proxy", str(PROXY), "-f", "json"]
    assert json.loads(cli(capsys, *pair))["faults"]["full"]["label"] == "precision_fault"
    assert json.loads(cli(capsys, *pair, *cfg))["faults"]["full"]["label"] == "healthy"
    # report
    rep = tmp_path / "r.json"
    cli(capsys, "report", str(FULL), "-f", "json", "-o", str(rep), *cfg)
    assert {d["label"] for d in json.loads(rep.read_text())["diagnoses"]} == {"healthy"}
    # watch (replayed)
    watched = cli(capsys, "watch", str(FULL), "--replay", "--format", "json", *cfg)
    finals = [json.loads(x) for x in watched.splitlines() if x.startswith("{")]
    assert [f["label"] for f in finals if f["final"]] == ["healthy"]
    assert not [f for f in finals if not f["final"]]  # no alert
    # the fleet: a store diagnosed and compared, then the dashboard analysing in memory
    store = tmp_path / "store"
    cli(capsys, "ingest", str(GROUP), "--store", str(store))
    assert set(
        _labels(cli(capsys, "diagnose", "--store", str(store), "--all", "-f", "json", *cfg))
    ) == {"healthy"}
    compared = cli(capsys, "compare", "--store", str(store), *cfg)
    fulls = {json.loads(x)["faults"]["full"]["label"] for x in compared.splitlines() if x}
    assert fulls == {"healthy"}
    badges = {}
    for name, extra in (("default", []), ("tuned", cfg)):
        fresh = tmp_path / f"fresh-{name}"
        cli(capsys, "ingest", str(GROUP), "--store", str(fresh))
        cli(capsys, "dashboard", "--store", str(fresh), "-o", str(tmp_path / name), *extra)
        html = (tmp_path / name / "index.html").read_text()
        badges[name] = html.count('class="badge b-precision_fault"')
    assert badges["default"] > 0 and badges["tuned"] == 0, badges
