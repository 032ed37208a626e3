"""W&B offline runs written by the real wandb client (offline mode, no network)."""

from __future__ import annotations

import builtins
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proxydiag import read_run, read_runs
from proxydiag.errors import IngestWarning, MissingExtraError
from proxydiag.ingest import ReadContext, detect
from proxydiag.ingest.wandb import offline as wandb_offline

pytest.importorskip(
    "wandb.sdk.internal.datastore", reason="wandb<0.30 (proxydiag[wandb]) not installed"
)

SCRIPT = """
import sys, wandb
run = wandb.init(project="proxy", dir=sys.argv[1], mode="offline", name="full-seed1",
                 config={"lr": 1e-3, "experts_kept": 32, "role": "full", "group": "g1"})
for i in range(6):
    run.log({"actor/grad_norm": [1.0, float("nan"), float("inf"), -float("inf"), 2.5, 3.0][i],
             "critic/score/mean": 0.1 * i, "note": "text", "nested": {"a": i}}, step=i * 10)
run.summary["best_reward"] = 0.9
run.finish()
"""


@pytest.fixture(scope="module")
def wandb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wb")
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_CONFIG_DIR": str(out / "cfg"),
        "WANDB_CACHE_DIR": str(out / "cache"),
    }
    subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, check=True, timeout=120)
    return out / "wandb"


def test_offline_run_round_trip(wandb_dir: Path) -> None:
    runs = read_runs(wandb_dir)  # latest-run (a symlink to the same run) is not read twice
    assert len(runs) == 1
    run = runs[0]
    assert run.name == "full-seed1"
    assert run.attrs["format"] == "wandb"
    steps, values = run.series("grad_norm")
    assert steps.tolist() == [0, 10, 20, 30, 40, 50]
    assert math.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf
    assert [values[0], values[4], values[5]] == [1.0, 2.5, 3.0]
    assert run.series("reward")[1].tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert sorted(run.frame["key"].unique().to_list()) == [
        "actor/grad_norm",
        "critic/score/mean",
        "nested.a",
    ]
    assert run.attrs["params"] == {"lr": 0.001, "experts_kept": 32, "role": "full", "group": "g1"}
    assert (run.attrs["role"], run.attrs["group"], run.attrs["experts_kept"]) == ("full", "g1", 32)
    assert run.attrs["summary"]["best_reward"] == 0.9
    assert run.frame["wall_time"].min() > 1.6e9


def test_detection_and_truncated_log(wandb_dir: Path, tmp_path: Path) -> None:
    run_dir = next(
        p for p in wandb_dir.iterdir() if p.name.startswith("offline-run-") and not p.is_symlink()
    )
    assert detect(run_dir) is wandb_offline
    # latest-run is skipped while walking wandb/ (read once, above), read when named
    assert [r.name for r in read_runs(wandb_dir / "latest-run")] == ["full-seed1"]
    link = tmp_path / "linked-wandb"  # a symlink above the run directory is fine
    link.symlink_to(wandb_dir)
    assert [r.name for r in read_runs(link)] == ["full-seed1"]
    log = next(run_dir.glob("run-*.wandb"))
    cut = tmp_path / "offline-run-cut"
    cut.mkdir()
    data = log.read_bytes()
    (cut / log.name).write_bytes(data[: len(data) * 2 // 3])
    with pytest.warns(IngestWarning, match=rf"{log.name}@\d+: damaged record"):
        run = read_run(cut)
    assert 0 < run.series("grad_norm")[0].size < 6


def test_missing_wandb_names_the_extra(wandb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_wandb(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("wandb"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    run_dir = next(
        p for p in wandb_dir.iterdir() if p.name.startswith("offline-run-") and not p.is_symlink()
    )
    assert wandb_offline.can_read(run_dir)
    with pytest.raises(MissingExtraError, match=r"pip install 'proxydiag\[wandb\]'"):
        wandb_offline.read(run_dir, ReadContext())
