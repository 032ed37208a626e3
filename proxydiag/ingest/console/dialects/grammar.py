r"""One grammar for metric lines: any line with a step counter and numeric key/value pairs.

Trainers print the same thing in a hundred shapes: a step counter and ``key value`` pairs,
behind a prefix, between separators. This dialect reads them without a rule per trainer; the
other dialects keep only what the grammar cannot know (DeepSpeed's ``OVERFLOW!`` lines,
Megatron's skipped/NaN counters, tracebacks, HF dicts and notebook tables with their run-end
summary), and a line any of them reads is theirs (:data:`FALLBACK`). All of it is polars
string expressions over a block of lines (no Python per line).

**A line**, once cleaned (ANSI colour codes dropped; of tqdm ``\r`` redraws the last segment;
leading prefixes dropped: timestamps, ``[rank0]:``/``[default0]:`` tags, Ray actor prefixes
``(WorkerDict pid=…)``, logger levels and names in ``INFO -``/``- root -``/``[INFO|f.py:12]``
chains), is a sequence of **pairs**: a key (a word, or several words before ``:`` or ``=``:
``lm loss``, ``elapsed time per iteration (ms)``, ``Grad. Norm``; quotes dropped) then ``:``,
``=`` or blanks, then a **number** (``1.00e-05``, ``nan``, ``inf``, ``-inf``, quoted, with
thousands separators ``12,345``, a multiplier ``1.2k``/``3.4M``/``1.1G``, or a unit that is
dropped: ``31.2GiB``, ``45%``, ``812 tokens/s``; a ``(…)`` after it is ignored). Fields may be
separated by ``|``, `` - ``, tabs, commas or runs of blanks: the pairs are found wherever they
are, so the separators need no rule.

**The step** is, in this order: an mmengine ``Epoch(train) [e][i/n]`` (step ``(e-1)·n+i``) or
``Iter(train) [i/n]``; a counter key (:data:`COUNTERS`: ``step``, ``iter``, ``iteration``,
``global_step``, ``global step``, ``current_steps``, ``steps``, ``it``, ``episode``,
``update``, ``num_updates``, ``batch``, ``[step=…]``), its value an integer or ``i/n``; an
``Epoch N`` with a batch counter ``i/n`` (``N·n+i`` for a 0-based epoch, ``(N-1)·n+i`` when
the file's epochs start at 1); a tqdm counter ``i/n [`` when nothing else is there. Counters
are not points; a float ``epoch`` beside a counter is.

**Step headers.** A line with a counter and no pairs (``===== Step 3/450 =====``,
``[batch=12/4800]:``, ``pipeline step 21 start...``) gives its step to the ``key: value`` lines
after it (at most :data:`HEADER_SCOPE_LINES`), until a line with a step of its own: NeMo-RL's
bullet blocks, composer, OLMo-core, AReaL's tables. A counter after a word (``from step 31``)
only ever heads: it is never the step of pairs on its own line (prose).

**What is not a metric line.** A line becomes points only when it has a step (its own or its
header's), or reports a metric that is not finite (``loss is nan, skipping``, ``grad_norm is
not finite: inf``: a point at the step in force); config dumps, argument lists and
``model.layers.0…`` printouts carry no step counter, so they never do. In a file with no step
counter anywhere, lines with two or more pairs take their order as steps (1, 2, …) and the run
says so (never in a chunk that continues a file: a live tail's).
"""

from __future__ import annotations

import re
from functools import partial

import polars as pl

from proxydiag.ingest.console import _shapes
from proxydiag.ingest.console._records import NUM, Chunk, Extract, empty_records, finish, scaled

NAME = "grammar"
#: lines another dialect reads are that dialect's: the grammar takes the rest
FALLBACK = True
#: the file's epoch numbering (0- or 1-based) runs from block to block
SEQUENTIAL = True

#: a key: words (letters, digits, ``_./-%()[]``), several only before ``:`` or ``=``
_WORD = r"[A-Za-z_][\w./\-%\[\]]*(?:\([^()\s]{1,12}\))?"
_KEY_MULTI = rf"{_WORD}(?: (?:{_WORD}|\([^()]{{1,20}}\)))*"
#: a pair: quoted or bare key, separator, quoted or bare number, optional unit
_PAIR = (
    rf"(?:['\"]({_KEY_MULTI})['\"]|({_KEY_MULTI}))\s*[:=]\s*['\"]?({NUM})([A-Za-z%/]*)"
    rf"|\b({_WORD})\s+({NUM})([A-Za-z%/]*)"
    rf"|({_KEY_MULTI})\s*\|\s*['\"]?({NUM})([A-Za-z%/]*)\s*(?:\||$)"
)
#: a pair the grammar matched, split: key, separator (none: blanks), number, unit
_SPLIT = rf"^['\"]?(.+?)['\"]?(?:\s*([:=|])\s*|\s+)['\"]?({NUM})([A-Za-z%/]*)\s*\|?$"
#: keys that count steps (never points)
COUNTERS = (
    "step",
    "steps",
    "iter",
    "iteration",
    "global_step",
    "global step",
    "current_steps",
    "it",
    "episode",
    "update",
    "num_updates",
    "batch",
    "global_step/max_steps",
)
_COUNTER = (
    r"(?i:(?:[\w.\-]+/)*\b(?:global[_ ]step(?:/max_steps)?|current_steps|num_updates"
    r"|iteration|iter|steps?|episode|update|batch|it))"
)
#: a counter and its value (``step 12``, ``step: 12``, ``iteration 20/ 100``, ``[step=3/9``,
#: ``'global_step/max_steps': '12/4389'``)
#: ... at the start of a field, or after a word with a blank and no ``:``/``=`` (``pipeline
#: step 21 start``): not the last word of a longer key (``Total optimization steps = 120``,
#: ``Gradient Accumulation steps = 4`` are settings, not counters)
_STEP = (
    rf"(?:^\s*|[^\w\s/]\s*|\d\s+|\s{{2,}})['\"]?{_COUNTER}['\"]?\s*[:=]?\s*['\"]?\[?\s*(\d+)"
    # an integer: not the start of ``155.39`` (``'timing/step': '155.39'`` is a duration)
    r"(?:\s*/\s*\d+)?(?:[^.\deE]|$)"
)
#: a counter after a word (``pipeline step 21 start...``, ``Starting training step 1``): a step
#: header when the line has no pairs; prose otherwise (``from step 31 (confidence 0.95)``)
#: (not ``batch``: after a word it is a size, ``rollout batch 512``, ``micro batch 4``)
_STEP_AFTER_WORD = (
    r"[A-Za-z]\s+(?i:global[_ ]step|iteration|iter|steps?|episode|update)\s+(\d+)(?:[^.\deE/]|$)"
)
_MM_EPOCH = r"Epoch\(\w+\)\s*\[(\d+)\]\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]"
_MM_ITER = r"Iter\(\w+\)\s*\[\s*(\d+)\s*/\s*\d+\s*\]"
_EPOCH_BATCH = (
    r"(?i:\bepoch)\s*\[?\s*(\d+)\b(?:\s*/\s*\d+\b)?\]?[^\d\[/]{1,8}?\[?\s*(\d+)\s*/\s*(\d+)\b"
)
_TQDM = r"(?:^|\s)(\d+)/(\d+)\s*\["
#: a step header's block ends after this many lines (NeMo-RL's is ~25; a config dump printed
#: later is not that step's)
HEADER_SCOPE_LINES = 40
#: words that make no metric in a bare ``word number`` pair
_FILLER = r"(?i)^(?:of|to|at|in|on|for|and|by|rank|gpu|node|pid|size|shape|dim|top|max|min)$"
_FRACTION = r"['\"]?\b\d+\s*/\s*\d+\b['\"]?"
#: prefixes dropped before the pairs are read (their digits are not metrics)
#: ANSI colour codes (dropped first: they split words and numbers)
_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
_PREFIX = (
    # a logger's prefix up to its level (``2026-… - root - INFO -``, ``host:0<tab>mod:68<tab>INFO``)
    r"^.{0,160}?\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL|TRACE|SUCCESS)\b\s*[:\-|\]]*"
    r"|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)"  # Ray actor prefixes
    r"|\[(?:rank|default)\d+\]:?"  # torchrun rank tags
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO timestamps
    r"|\d\d/\d\d/\d{4} \d\d:\d\d:\d\d(?:[.,]\d+)?"  # US dates (accelerate)
    r"|\b(?:\d+ days?, )?\d+:\d\d:\d\d(?:[.,]\d+)?"  # times and durations
    r"|\b\d+h\s?\d+m(?:\s?\d+(?:\.\d+)?s)?\b|\b\d+m\s?\d+(?:\.\d+)?s\b"  # 6h41m12s, 1m 2s
    r"|\[[A-Z]+\|[^\]]*\]"  # [INFO|file.py:12]
    r"|\b[\w.]+\.py:\d+\b"  # file.py:123
    r"|\b[A-Za-z_][\w.]*:[A-Za-z_<>]\w*:\d+\b"  # loguru's module:function:line
    r"|\b[A-Za-z_]\w*(?:\.\w+)+:\d+\s*(?:>>|\]|-\s)"  # logger.name:lineno >>
    r"|\b(?:pid|tid|rank|local_rank|node|gpu)[=:]\s*\d+\b"  # process tags
    r"|\d+(?:\.\d+)?\s*(?:s|it|ms)/it\b|\d+(?:\.\d+)?\s*it/s\b"  # tqdm rates
    r"|\d+:\d\d(?::\d\d)?<(?:\d+:\d\d(?::\d\d)?|\?)"  # tqdm's elapsed<remaining
    r"|\d+%\|[^|]*\|"  # tqdm bars
)
#: ``<metric> is nan``, ``<metric> is not finite: inf``: a point at the step in force
_WARN = rf"\b({_WORD}) (?:is|was|became)(?: not finite)?:?\s*['\"]?(nan|NaN|-?inf|-?Inf)\b"

_SNIFF_COUNTER = (
    r"\b(?:step|steps|iter|iteration|global[_ ]step|current_steps|episode|update|num_updates"
    r"|batch)\b['\"]?\s*[:=]?\s*['\"]?\[?\s*\d+"
)
_SNIFF_PAIR = r"\b[A-Za-z_][\w./\-]*['\"]?\s*[:=|│]\s*['\"]?[-+]?(?:\d|\.\d|nan|inf)"
#: a counter and a pair on one line (either order), a counter line then a pair line within a
#: dozen lines (a step header and its block), or mmengine's counters
SNIFF = re.compile(
    rf"(?im)^[^\n]*{_SNIFF_COUNTER}[^\n]*{_SNIFF_PAIR}"
    rf"|^[^\n]*{_SNIFF_PAIR}[^\n]*{_SNIFF_COUNTER}"
    rf"|^[^\n]*{_SNIFF_COUNTER}[^\n]*(?:\n[^\n]*){{0,12}}?\n[^\n]*{_SNIFF_PAIR}"
    r"|^[^\n]*(?:Epoch|Iter)\(\w+\)\s*\["
    # ``step 1 | loss 1.93``: a counter and a bare ``word number`` pair after a separator
    rf"|^[^\n]*{_SNIFF_COUNTER}\s*[|,]\s*[^\n]*\b[A-Za-z_][\w./\-]*\s+[-+]?\d"
    # a tqdm bar with a postfix of pairs (Lightning, OpenRLHF, NeMo-Aligner)
    r"|^[^\n]*\d+/\d+\s*\[[^\]\n]*\b[A-Za-z_][\w./\-]*=[-+]?(?:\d|\.\d|nan|inf)"
)


def extract(chunk: Chunk) -> Extract:
    """The pairs of the block's metric lines, at their steps (see the module docstring)."""
    state = chunk.state.setdefault(NAME, {})
    if "epoch_base" not in state:
        epochs = (
            chunk.lines.filter(pl.col("text").str.contains("(?i)epoch"))
            .select(
                _clean(pl.col("text")).str.extract(_EPOCH_BATCH, 1).cast(pl.Int64, strict=False)
            )
            .to_series()
            .min()
        )
        if epochs is not None:
            state["epoch_base"] = 0 if epochs == 0 else 1
    facts = _shapes.facts(
        chunk.lines, state, partial(_facts, epoch_base=state.get("epoch_base", 0)), _CANDIDATE
    )
    if facts.lines.is_empty():
        return Extract(empty_records())
    frame = facts.lines
    pairs = _pairs(frame, facts.pairs, state)
    warn = finish_rows(facts.warnings) if facts.warnings.height else empty_records()
    if warn.height and pairs.height:  # a warning line's pair read as a pair already
        warn = warn.join(pairs.select("line", "key"), on=["line", "key"], how="anti")
    records = pl.concat([empty_records(), pairs, warn]).sort("line", maintain_order=True)
    # progress lines: lines with a counter (a step header with no pairs too), worded step
    # headers, and lines with points at their own step; a line that reports on the step in
    # force takes it from there (a bare tqdm bar is none: its counter may be another bar's)
    headers = state.pop("worded_headers", None)
    anchors = (
        pl.concat(
            [
                frame.filter(pl.col("step").is_not_null() & pl.col("explicit")).select(
                    "line", "step"
                ),
                *([headers] if isinstance(headers, pl.DataFrame) else []),
                records.filter(pl.col("anchor")).select("line", "step"),
            ]
        )
        .unique("line", keep="first")
        .sort("line")
    )
    return Extract(records, anchors=anchors if anchors.height else None)


#: a line the grammar reads: digits or a non-finite word, and not a whole dict (the dict
#: dialect's even when it takes no points from it: the HF Trainer's run-end summary)
_CANDIDATE = pl.col("text").str.contains(r"\d|(?i:nan|inf)") & ~pl.col("text").str.contains(
    r"^[^{]*\{['\"][^{}]*\}\s*$"
)


def _clean(text: pl.Expr) -> pl.Expr:
    """A line without its tqdm redraws, colour codes and prefixes (the module docstring)."""
    return (
        text.str.replace(r"^.*\r", "")
        .str.replace_all(_ANSI, "")
        .str.replace_all(_PREFIX, " ")
        # box-drawn tables (``│ key │ value │``) are ``|`` tables
        .str.replace_all(r"[│┃║]", "|")
    )


def _facts(lines: pl.DataFrame, *, epoch_base: int) -> _shapes.Facts:
    """What each line says on its own (:class:`~._shapes.Facts`), read by the grammar."""
    frame = lines.select("line", _clean(pl.col("text")).alias("t"))
    frame = frame.with_columns(
        _step_of(epoch_base).alias("step"),
        # a step header names its step explicitly (a tqdm counter alone heads nothing)
        (
            pl.col("t").str.contains(_STEP)
            | pl.col("t").str.contains(_MM_EPOCH)
            | pl.col("t").str.contains(_MM_ITER)
        ).alias("explicit"),
        pl.col("t").str.extract(_STEP_AFTER_WORD, 1).cast(pl.Int64, strict=False).alias("worded"),
    )
    return _shapes.Facts(
        frame.select("line", "step", "explicit", "worded"), _line_pairs(frame), _warnings(frame)
    )


def _step_of(epoch_base: int) -> pl.Expr:
    """The step a cleaned line (column ``t``) names, or null."""
    t = pl.col("t")
    mm = t.str.extract_groups(_MM_EPOCH)
    mm_step = (mm.struct.field("1").cast(pl.Int64) - 1) * mm.struct.field("3").cast(
        pl.Int64
    ) + mm.struct.field("2").cast(pl.Int64)
    eb = t.str.extract_groups(_EPOCH_BATCH)
    epoch = eb.struct.field("1").cast(pl.Int64, strict=False)
    # a 0-based epoch count (Lightning: ``Epoch 0:``) unless the file's epochs start at 1
    eb_step = (epoch - epoch_base) * eb.struct.field("3").cast(
        pl.Int64, strict=False
    ) + eb.struct.field("2").cast(pl.Int64, strict=False)
    counter = t.str.extract(_STEP, 1).cast(pl.Int64, strict=False)
    tqdm = t.str.extract(_TQDM, 1).cast(pl.Int64, strict=False)
    return pl.coalesce(
        mm_step,
        t.str.extract(_MM_ITER, 1).cast(pl.Int64, strict=False),
        counter,
        eb_step,
        tqdm,
    )


def _line_pairs(frame: pl.DataFrame) -> pl.DataFrame:
    """The numeric pairs of each cleaned line (``line``, ``step``, ``key``, ``value``,
    ``bare``), in the order they are printed; counters, filler words and integer epochs are
    no pairs."""
    # a line whose only step is a tqdm counter: its pairs are the bar's postfix, after the
    # counter (before it is the bar's description: ``Tokenizing (num_proc=2): 100%|…| 5/5``)
    text = (
        pl.when(~pl.col("explicit") & pl.col("t").str.contains(_TQDM))
        .then(pl.col("t").str.replace(r"^.*?\d+/\d+\s*\[", ""))
        .otherwise(pl.col("t"))
    )
    # ``i/n`` counters are steps or progress, never values (``shards: 4/4``, ``12/4389``)
    text = text.str.replace_all(_FRACTION, " ")
    found = frame.select("line", "step", text.str.extract_all(_PAIR).alias("m")).explode("m")
    found = found.filter(pl.col("m").is_not_null())
    # each match split again by a simpler pattern (cheaper than the pair grammar's groups)
    parts = found.with_columns(pl.col("m").str.extract_groups(_SPLIT).alias("g")).unnest("g")
    key = pl.col("1").str.strip_chars()
    num = pl.col("3")
    unit = pl.col("4").fill_null("")
    out = parts.select(
        "line",
        "step",
        key.alias("key"),
        scaled(num, unit).alias("value"),
        pl.col("2").is_null().alias("bare"),
        num.str.contains(r"^[-+]?\d+$").alias("integer"),
    )
    # a counter, also under a namespace (``training/global_step``, ``train/step``)
    last = pl.col("key").str.to_lowercase().str.extract(r"([^/]+)$", 1)
    is_counter = pl.col("key").str.to_lowercase().is_in(list(COUNTERS)) | (
        last.is_in(list(COUNTERS)) & pl.col("integer")
    )
    out = out.filter(
        pl.col("value").is_not_null()
        & ~is_counter
        # a bare ``word number`` pair of a filler word is no metric
        & ~(pl.col("bare") & pl.col("key").str.contains(_FILLER))
        # an epoch printed as an integer counts epochs; as a float (``0.16``) it is a point
        & ~(pl.col("integer") & pl.col("key").str.contains(r"(?i)(?:^|/)epochs?$"))
    )
    return out.select("line", "step", "key", "value", "bare")


def _pairs(frame: pl.DataFrame, out: pl.DataFrame, state: dict[str, object]) -> pl.DataFrame:
    """One row per numeric pair of the lines (``line``, ``step``, ``key``, ``value``,
    ``attach``): lines with a step keep it, lines under a step header take its step
    (:func:`_in_blocks`); other lines are kept for the record order (``attach = 2``, used
    only when the file has no step counter at all)."""
    out = _in_blocks(frame, out.with_columns(pl.col("step").is_not_null().alias("own")), state)
    # a line under a header: its bare ``word number`` (prose: ``Total Micro Batches 460``) is
    # no point, only ``key: value`` / ``key=value`` / ``key | value`` pairs are
    out = out.filter(pl.col("own") | ~pl.col("bare"))
    # other step-less lines: only in a file without step counters, with two or more pairs
    per_line = out.group_by("line").agg(pl.len().alias("_n"))
    out = out.join(per_line, on="line", how="left")
    out = out.filter(pl.col("step").is_not_null() | (pl.col("_n") >= 2))
    if out.is_empty():
        return empty_records()
    attach = pl.when(pl.col("step").is_null()).then(2).otherwise(0)
    out = out.with_columns(
        attach.cast(pl.Int8).alias("attach"),
        pl.col("own").alias("anchor"),
        pl.lit(None, dtype=pl.Float64).alias("wall_time"),
    )
    return out.select(
        "line", "step", pl.col("key").cast(pl.Categorical), "value", "wall_time", "attach", "anchor"
    )


def _in_blocks(frame: pl.DataFrame, pairs: pl.DataFrame, state: dict[str, object]) -> pl.DataFrame:
    """Step-less pair lines under a step header take its step.

    A header is a line with a step and no pairs of its own (``===== Step 3/450 =====``,
    ``[batch=12/4800]:``); the lines of pairs after it (``• Loss: 0.02``, ``Train loss: 2.3``)
    are that step's, until a line with a step of its own. The header in force runs from block
    to block (``state``).
    """
    with_pairs = pairs.select("line").unique().with_columns(pl.lit(True).alias("_p"))
    marks = (
        frame.select("line", "step", "explicit", "worded")
        .join(with_pairs, on="line", how="left")
        .sort("line")
        .select(
            "line",
            pl.when(pl.col("step").is_not_null() & pl.col("_p").is_null() & pl.col("explicit"))
            .then(pl.col("step"))
            .when(
                pl.col("step").is_null() & pl.col("_p").is_null() & pl.col("worded").is_not_null()
            )
            .then(pl.col("worded"))
            .when(pl.col("step").is_not_null())
            .then(pl.lit(-1, dtype=pl.Int64))
            .otherwise(None)
            .alias("_h"),
        )
    )
    first = state.get("header")
    if isinstance(first, int):
        start = pl.DataFrame({"line": [-1], "_h": [first]}, schema=marks.schema)
        marks = pl.concat([start, marks])
    marks = marks.with_columns(pl.col("_h").forward_fill(limit=HEADER_SCOPE_LINES))
    if marks.height and marks["_h"][-1] is not None:
        state["header"] = int(marks["_h"][-1])
    block = marks.select("line", pl.when(pl.col("_h") >= 0).then(pl.col("_h")).alias("_b"))
    # worded step headers are progress lines too
    worded = frame.join(with_pairs, on="line", how="anti").filter(
        pl.col("step").is_null() & pl.col("worded").is_not_null()
    )
    state["worded_headers"] = worded.select("line", pl.col("worded").alias("step"))
    out = pairs.join(block, on="line", how="left")
    return out.with_columns(pl.coalesce("step", "_b").alias("step")).drop("_b")


def _warnings(frame: pl.DataFrame) -> pl.DataFrame:
    """Points of ``<metric> is nan`` lines (``line``, ``step``, ``key``, ``value``): at their
    own step, else the previous line's (``attach``, set by :func:`finish_rows`)."""
    hits = frame.select(
        "line",
        "step",
        pl.col("t").str.extract_groups(_WARN).alias("g"),
    ).unnest("g")
    hits = hits.filter(pl.col("1").is_not_null())
    return hits.select(
        "line",
        "step",
        pl.col("1").alias("key"),
        pl.col("2").str.to_lowercase().cast(pl.Float64, strict=False).alias("value"),
    )


def finish_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """Records of warning rows: ``attach`` -1 (the previous progress line's step) when the
    line names no step of its own."""
    attach = pl.when(pl.col("step").is_null()).then(-1).otherwise(0).cast(pl.Int8)
    done = finish(frame)
    return done.with_columns(frame.select(attach).to_series().alias("attach"))
