"""Every registered plug-in passes its extension point's common checks.

A new reader, dialect, detector, fidelity test, aligner or synth writer gets these checks by
being registered (``proxydiag.testing.contracts``; the scikit-learn / river habit of checking
every estimator). A registered plug-in that does not import fails here, by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from proxydiag.align.grid import ALIGNERS
from proxydiag.diagnose.api import DETECTORS
from proxydiag.fidelity.api import TESTS
from proxydiag.ingest import READERS
from proxydiag.ingest.console.dialects import DIALECTS
from proxydiag.registry import Registry
from proxydiag.synth import simulate
from proxydiag.synth.writers import WRITERS, write_run
from proxydiag.testing import contracts


def _written(fmt: str, naming: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        return write_run(
            tmp / fmt, simulate("divergence", seed=0), fmt=fmt, naming=naming, log_interval=5
        )

    return make


def _parquet(tmp: Path) -> Path:
    path = tmp / "metrics.parquet"
    pl.DataFrame({"step": [1, 2, 3], "loss": [2.0, float("nan"), 1.5]}).write_parquet(path)
    return path


def _trainer_state(tmp: Path) -> Path:
    path = tmp / "trainer_state.json"
    history = [
        {"step": s, "loss": 2.0 / s, "grad_norm": 1.0, "learning_rate": 1e-5} for s in (10, 20, 30)
    ]
    path.write_text(json.dumps({"log_history": history, "global_step": 30}))
    return path


def _wandb_csv(tmp: Path) -> Path:
    path = tmp / "wandb_export.csv"
    path.write_text(
        '"Step","run-a - loss","run-a - loss__MIN","run-a - loss__MAX"\n'
        '"1","2.0","2.0","2.0"\n"2","1.5","1.5","1.5"\n'
    )
    return path


#: reader -> a sample of its format; readers of servers and databases (mlflow_uri, mlflow_sql)
#: and of W&B's binary logs (wandb) get the generic checks here, and reads in their own tests
SAMPLES: dict[str, Callable[[Path], Path]] = {
    "tensorboard": _written("tensorboard", "verl"),
    "mlflow_files": _written("mlflow", "verl"),
    "csv": _written("csv", "openrlhf"),
    "jsonl": _written("jsonl", "verl"),
    "console": _written("megatron", "megatron"),
    "parquet": _parquet,
    "trainer_state": _trainer_state,
    "wandb_csv": _wandb_csv,
}


def _entries(registry: Registry[object]) -> list[str]:
    return list(registry.names())


@pytest.mark.parametrize("name", _entries(READERS))  # type: ignore[arg-type]
def test_reader(name: str, tmp_path: Path) -> None:
    make = SAMPLES.get(name)
    runs = contracts.check_reader(READERS[name], name=name, sample=make(tmp_path) if make else None)
    assert bool(runs) == (make is not None)


@pytest.mark.parametrize("name", _entries(DIALECTS))  # type: ignore[arg-type]
def test_dialect(name: str) -> None:
    contracts.check_dialect(DIALECTS[name], name=name)


@pytest.mark.parametrize("name", _entries(DETECTORS))  # type: ignore[arg-type]
def test_detector(name: str) -> None:
    contracts.check_detector(DETECTORS[name], name=name)


@pytest.mark.parametrize("name", _entries(TESTS))  # type: ignore[arg-type]
def test_fidelity_test(name: str) -> None:
    contracts.check_fidelity_test(TESTS[name], name=name)


@pytest.mark.parametrize("name", _entries(ALIGNERS))  # type: ignore[arg-type]
def test_aligner(name: str) -> None:
    contracts.check_aligner(ALIGNERS[name], name=name)


@pytest.mark.parametrize("fmt", _entries(WRITERS))  # type: ignore[arg-type]
def test_writer_round_trip(fmt: str) -> None:
    run = contracts.check_writer(WRITERS[fmt], fmt=fmt)
    assert run.frame.height > 0


def test_a_broken_plug_in_is_an_error_naming_it() -> None:
    from proxydiag.errors import PluginError

    reg: Registry[object] = Registry("reader", {"gone": "proxydiag.ingest.no_such_reader"})
    with pytest.raises(PluginError, match=r"^reader 'gone': cannot import"):
        reg["gone"]
    with pytest.raises(PluginError, match=r"^unknown reader 'x'; use one of gone$"):
        reg["x"]


def test_a_check_fails_on_a_broken_plug_in() -> None:
    class Loud:
        NAME = "loud"

        @staticmethod
        def can_read(source: object) -> bool:
            return True  # says yes to everything

        @staticmethod
        def read(source: object, ctx: object) -> list[object]:
            return []

    with pytest.raises(contracts.ContractError, match=r"can_read.*must be False"):
        contracts.check_reader(Loud(), name="loud")  # type: ignore[arg-type]
