"""``proxydiag bench diagnose|compare``: bad options and bad labels are one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxydiag.cli import main
from proxydiag.errors import ConfigError
from proxydiag.evaluate.diagnose import load_labels
from tests._paths import SAMPLES


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit code and the non-blank stderr lines of ``proxydiag ARGS``."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    assert captured.out == ""
    return int(info.value.code or 0), captured.err


@pytest.mark.parametrize("command", ["compare", "diagnose"])
def test_unknown_format_is_one_line_before_any_work(
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = cli(capsys, "bench", command, str(SAMPLES), "--format", "yaml")
    assert code == 2
    assert err.strip() == (
        "error: Invalid value for '--format' / '-f': 'yaml' is not one of 'text', 'json', "
        f"'markdown'. (see 'proxydiag bench {command} --help')"
    )


@pytest.mark.parametrize("command", ["compare", "diagnose"])
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "cannot read labels"),
        ('{"pairs": {}}', "has no 'runs' object"),
        ('{"runs": {}, "pairs": []}', "'pairs' in labels.json is not an object"),
        ('{"runs": {"r": 5}}', "run 'r' needs an object"),
        ('{"runs": {"r": {"label": "healthy"}}}', "run 'r' needs an object with a 'path'"),
        ('{"runs": {"r": {"path": "r", "label": "healthy"}}, "pairs": {"p": 5}}', "pair 'p' needs"),
        (
            '{"runs": {"r": {"path": "r", "label": "healthy"}}, "pairs": {"p": {"full": ["r"], '
            '"proxy": "x"}}}',
            "(not 'x')",
        ),
    ],
)
def test_bad_labels_are_one_line(
    command: str,
    content: str,
    needle: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "labels.json").write_text(content)
    code, err = cli(capsys, "bench", command, str(tmp_path))
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"error: {tmp_path / 'labels.json'}: ")
    assert needle in err


@pytest.mark.parametrize("command", ["compare", "diagnose"])
def test_missing_labels_name_the_file(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = cli(capsys, "bench", command, str(tmp_path))
    assert code == 2 and err.startswith(f"error: {tmp_path / 'labels.json'}: no labels.json")


def test_one_loader_reads_the_corpus_folder_or_its_file() -> None:
    by_dir, by_file = load_labels(SAMPLES), load_labels(SAMPLES / "labels.json")
    assert by_dir == by_file and by_dir.runs and by_dir.pairs
    rid = next(iter(by_dir.runs))
    assert by_dir.run_path(rid).exists()
    with pytest.raises(ConfigError, match=r"no labels\.json"):
        load_labels(SAMPLES / "no-such-corpus")
