"""Every notebook in notebooks/ runs top to bottom (nbclient, real ipykernel) without error,
and is committed without outputs."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests._paths import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SAMPLES = Path(os.environ.get("PROXYDIAG_SAMPLE_RUNS", ROOT / "sample_runs"))

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

#: first cell of every executed copy: which interpreter runs the kernel
PROBE = "import sys; print(sys.executable)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: clear outputs"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path) -> None:
    if not any(SAMPLES.glob("*/")):
        pytest.skip(
            f"sample runs not found at {SAMPLES} (python -c 'import proxydiag.synth as s; "
            's.write_sample_runs("sample_runs")\')'
        )
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PROBE))
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(path.parent)}},  # cwd = notebooks/
    )
    started = time.monotonic()
    client.execute()  # raises CellExecutionError naming the failing cell
    elapsed = time.monotonic() - started
    probe = nb.cells[0].outputs[0]["text"].strip()
    # jupyter_client runs the "python" of the python3 kernelspec as this interpreter (the venv)
    assert Path(probe).resolve() == Path(sys.executable).resolve()
    assert elapsed < 120, f"{path.name} took {elapsed:.0f} s"
    print(f"{path.name}: {elapsed:.1f} s")
