"""Commands that write a folder (``-o DIR``) refuse a file there in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxydiag.cli import main


def _run_cli(*argv: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    return int(exc.value.code or 0)


@pytest.mark.parametrize(
    "command", [["synth", "-s", "healthy"], ["dashboard", "--store", "{store}"]]
)
def test_output_that_is_a_file_is_one_line(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "store").mkdir()
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    argv = [c.format(store=tmp_path / "store") for c in command]
    assert _run_cli(*argv, "-o", str(afile)) == 2
    assert capsys.readouterr().err == (
        f"error: {afile}: is a file; -o needs a directory (created when missing)\n"
    )
    assert afile.read_text() == "keep me"
