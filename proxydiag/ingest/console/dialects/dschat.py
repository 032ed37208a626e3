"""DeepSpeed-Chat (SFT / reward model / DPO / PPO) and DeepSpeed example lines.

- PPO: ``epoch: 0|step: 0|ppo_ep: 1|act_loss: 0.21|cri_loss: 0.12|unsuper_loss: 0.0``
  (an anchor; ``step`` is the 0-based generation-batch index as printed), followed by
  ``average reward score: -0.68`` and ``|E2E latency=7.99s |Gather latency=... |Generate
  time=... |Training time=... |Others=... |CurSamplesPerSec=8.01 |AvgSamplesPerSec=8.01``:
  neither has a step of its own, both belong to the step line above (``attach = -1``).
- SFT: ``ppl: 1.93`` after ``***** Evaluating perplexity, Epoch 3/16 *****``: the
  evaluation at the end of the epoch, at the last step trained (step 0 before training).
- Reward model: ``chosen_last_scores (higher is better) : 2.81, acc (higher is better) :
  0.49`` and ``Epoch 1/1 with loss 0.67``, attached the same way.
- DeepSpeed ``random_ltd`` example: ``Step at 4 with Perplexity: nan`` (an anchor).

The ``step=N`` lines of these logs are DeepSpeed's own count of optimizer steps (1-based,
:mod:`console_deepspeed`); the PPO step line is 0-based: both are kept as printed.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console import _records as rec

NAME = "dschat"
SNIFF = re.compile(
    r"^epoch: \d+\|step: \d+\|"
    r"|^average reward score: |E2E latency=|^ppl: |Evaluating perplexity, Epoch"
    r"|chosen_last_scores \(higher is better\)|Step at \d+ with Perplexity: ",
    re.MULTILINE,
)

_PPO = r"epoch: \d+\|step: (\d+)\|(.*)$"
_E2E = {
    "e2e_latency": r"E2E latency=([^s|\s]+)s",
    "gather_latency": r"Gather latency=([^s|\s]+)s",
    "generate_time": r"Generate time=([^s|\s]+)s",
    "training_time": r"Training time=([^s|\s]+)s",
    "CurSamplesPerSec": r"CurSamplesPerSec=([^|\s]+)",
    "AvgSamplesPerSec": r"AvgSamplesPerSec=([^|\s]+)",
}
#: (key, pattern with one value group) attached to the previous progress line
_AFTER = {
    "average reward score": r"^average reward score: (\S+)",
    "ppl": r"^ppl: (\S+)",
    "chosen_last_scores": r"chosen_last_scores \(higher is better\) : ([^,\s]+)",
    "acc": r"acc \(higher is better\) : ([^,\s]+)",
    "epoch_loss": r"^Epoch \d+/\d+ with loss (\S+)",
}
_PERPLEXITY = r"Step at (\d+) with Perplexity: (\S+)"


def extract(chunk: rec.Chunk) -> rec.Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    lines = chunk.lines.filter(
        rec.any_of(
            "|step: ",
            "E2E latency=",
            "Perplexity: ",
            "higher is better",
            "average reward score",
            "ppl: ",
            "Epoch ",
        )
    )
    if lines.is_empty():
        return rec.Extract(rec.empty_records())
    parts = [
        _ppo(chunk, lines),
        _e2e(chunk, lines),
        _after(chunk, lines),
        _perplexity(chunk, lines),
    ]
    return rec.Extract(pl.concat(parts))  # each key comes from one kind of line


def _ppo(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    hits = lines.select("line", pl.col("text").str.extract_groups(_PPO).alias("m")).unnest("m")
    hits = (
        hits.filter(pl.col("1").is_not_null())
        .select("line", rec.steps(pl.col("1")).alias("step"), pl.col("2").alias("rest"))
        .filter(pl.col("step").is_not_null())
    )
    if hits.is_empty():
        return rec.empty_records()
    fields = rec.pairs(hits, column="rest", sep="|", kv=":", keep=("line", "step"))
    fields = rec.checked(fields, path=chunk.path, raw="raw", what="DeepSpeed-Chat")
    return rec.finish(fields, anchor=True)


def _e2e(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    hits = lines.filter(pl.col("text").str.contains("E2E latency=", literal=True))
    if hits.is_empty():
        return rec.empty_records()
    long = pl.concat(
        [
            hits.select(
                "line", pl.lit(key).alias("key"), pl.col("text").str.extract(pat, 1).alias("raw")
            )
            for key, pat in _E2E.items()
        ]
    ).filter(pl.col("raw").is_not_null())
    return rec.finish(rec.checked(long, path=chunk.path, raw="raw", what="E2E latency"), attach=-1)


def _after(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    long = pl.concat(
        [
            lines.select(
                "line", pl.lit(key).alias("key"), pl.col("text").str.extract(pat, 1).alias("raw")
            )
            for key, pat in _AFTER.items()
        ]
    ).filter(pl.col("raw").is_not_null())
    if long.is_empty():
        return rec.empty_records()
    long = long.sort("line", maintain_order=True)
    return rec.finish(
        rec.checked(long, path=chunk.path, raw="raw", what="DeepSpeed-Chat"), attach=-1
    )


def _perplexity(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    hits = lines.select("line", pl.col("text").str.extract_groups(_PERPLEXITY).alias("m")).unnest(
        "m"
    )
    hits = (
        hits.filter(pl.col("1").is_not_null())
        .select(
            "line",
            rec.steps(pl.col("1")).alias("step"),
            pl.lit("perplexity").alias("key"),
            pl.col("2").alias("raw"),
        )
        .filter(pl.col("step").is_not_null())
    )
    if hits.is_empty():
        return rec.empty_records()
    return rec.finish(rec.checked(hits, path=chunk.path, raw="raw", what="perplexity"), anchor=True)
