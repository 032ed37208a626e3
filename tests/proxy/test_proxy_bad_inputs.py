"""``proxydiag proxy build`` on bad inputs: one line naming the file, exit 2, no OUT left."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from _proxy_models import save_model

from proxydiag.cli import main


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_model("mixtral", tmp_path_factory.mktemp("good") / "mixtral")


def _truncate(d: Path) -> None:
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _garbage_header(d: Path) -> None:
    f = d / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:8] + b"{not json" + data[17:])


def _tiny_file(d: Path) -> None:
    (d / "model.safetensors").write_bytes(b"\x01\x02")


def _dense_config(d: Path) -> None:
    cfg = json.loads((d / "config.json").read_text())
    del cfg["num_local_experts"]
    cfg["model_type"] = "llama"
    (d / "config.json").write_text(json.dumps(cfg))


def _unknown_family(d: Path) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "some_new_moe"
    (d / "config.json").write_text(json.dumps(cfg))


def _wrong_count(d: Path) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_local_experts"] = 16
    (d / "config.json").write_text(json.dumps(cfg))


def _no_weights(d: Path) -> None:
    (d / "model.safetensors").unlink()


def _index_missing_shard(d: Path) -> None:
    index = {"metadata": {}, "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))


CASES: dict[str, tuple[Callable[[Path], None], list[str], str]] = {
    "truncated": (_truncate, ["--keep", "0.5"], "truncated"),
    "malformed header": (_garbage_header, ["--keep", "0.5"], "malformed safetensors header"),
    "two-byte file": (_tiny_file, ["--keep", "0.5"], "no header"),
    "dense config": (_dense_config, ["--keep", "0.5"], "not a mixture-of-experts config"),
    "unknown family": (_unknown_family, ["--keep", "0.5"], "'some_new_moe' is not a supported"),
    "count mismatch": (_wrong_count, ["--keep", "0.5"], "the config says 16"),
    "no weights": (_no_weights, ["--keep", "0.5"], "no *.safetensors"),
    "index without shard": (_index_missing_shard, ["--keep", "0.5"], "is missing"),
    "keeps zero": (lambda d: None, ["--keep", "0.05"], "keeps 0 of 8 experts"),
    "ratio above one": (lambda d: None, ["--keep", "1.5"], "must be in (0, 1]"),
    "both counts": (lambda d: None, ["--keep", "0.5", "--experts", "2"], "exactly one"),
    "neither count": (lambda d: None, [], "exactly one"),
    "too many experts": (lambda d: None, ["--experts", "9"], "between 1 and the 8"),
    "unknown method": (lambda d: None, ["--keep", "0.5", "--method", "x"], "is not one of"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2(
    case: str, good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, args, expected = CASES[case]
    src = tmp_path / "ckpt"
    shutil.copytree(good, src)
    damage(src)
    with pytest.raises(SystemExit) as exit_info:
        main(["proxy", "build", str(src), "-o", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2
    assert err.startswith("error: ") and "\n" not in err and expected in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_existing_out_needs_force(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        main(["proxy", "build", str(good), "-o", str(tmp_path / "out"), "--keep", "0.5"])
    assert exit_info.value.code == 2 and "pass --force" in capsys.readouterr().err
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"
    with pytest.raises(SystemExit) as exit_info:
        main(["proxy", "build", str(good), "-o", str(tmp_path / "out"), "--keep", "0.5", "--force"])
    assert exit_info.value.code == 0
    assert "kept 4 of 8 experts in 2 MoE layers" in capsys.readouterr().out
    assert not (tmp_path / "out" / "keep.txt").exists()
