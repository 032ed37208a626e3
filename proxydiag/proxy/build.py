"""``proxydiag.proxy.build``: an expert-pruned proxy of a Hugging Face MoE checkpoint.

The backbone, the shared experts and the router are kept; per MoE layer the chosen experts
are kept (renumbered 0..k-1 in the per-expert layout, sliced in the fused one) and the router's
rows and per-expert terms re-indexed to them, so routing among survivors is unchanged. Weights
are copied by byte range (:mod:`proxydiag.proxy._writer`) into a temporary folder beside OUT,
moved into place at the end: an interrupted build leaves no half-written OUT.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from proxydiag.errors import ConfigError
from proxydiag.proxy._tensors import INDEX_NAME, TensorInfo, open_checkpoint
from proxydiag.proxy._writer import OutTensor, write_checkpoint
from proxydiag.proxy.families import MoeConfig, group_count, pruned_config, read_config
from proxydiag.proxy.layout import MoeLayer, find_layers
from proxydiag.proxy.result import ProxyResult, count_params
from proxydiag.proxy.select import METHODS, LayerStats, choose

#: weight files of other formats are not copied (the proxy's weights are its safetensors)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf")
SIDECAR = "proxydiag.json"
#: calibration tokens per layer whose expert outputs are k-means features
_SAMPLE_TOKENS = 64


def build(
    checkpoint: Path | str,
    out: Path | str,
    *,
    keep_ratio: float | None = None,
    n_experts: int | None = None,
    method: str = "kmeans",
    calibration: Path | str | None = None,
    seed: int = 0,
    force: bool = False,
    sketch_dim: int = 1024,
    max_tokens: int = 4096,
    max_shard_bytes: int = 5 * 10**9,
    offload_dir: Path | str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ProxyResult:
    """Write to ``out`` a proxy of ``checkpoint`` with ``keep_ratio`` (or ``n_experts``) of
    each MoE layer's routed experts, chosen by ``method``.

    Parameters
    ----------
    checkpoint, out
        Hugging Face checkpoint folders (``config.json`` and ``*.safetensors``).
    keep_ratio, n_experts
        One of them: the fraction of experts kept per layer (rounded, at least one expert) or
        their number.
    method
        ``kmeans`` (cluster the experts, keep the one nearest each centroid), ``frequency``
        (most routed) or ``reap`` (highest router-weighted activation saliency); the last two
        need ``calibration``, which ``kmeans`` uses when given (experts' outputs, not weights).
    calibration
        Text file (one sample per line, or JSONL with ``text``) run through the model on CPU.
    seed
        Seeds the clustering and the weight sketch: the same seed gives the same proxy.
    force
        Replace an existing ``out``.
    sketch_dim
        Dimensions each expert tensor is reduced to before clustering.
    max_tokens
        Calibration tokens read at most.
    max_shard_bytes
        Largest output shard; more data is split into shards with an index.
    offload_dir
        Calibrate with each decoder layer on disk, loaded while it runs (RAM: about one
        layer; disk: the experts, as transformers converts them). Default: the whole model
        in RAM.
    """
    src, dst = Path(checkpoint), Path(out)
    _check_args(src, dst, keep_ratio, n_experts, method, calibration, force)
    cfg = read_config(src)
    tensors, meta = open_checkpoint(src)
    layers = find_layers(tensors, n_experts=cfg.n_experts, where=str(src))
    n_keep = keep_count(cfg.n_experts, keep_ratio=keep_ratio, n_experts=n_experts)
    groups = group_count(cfg, n_keep)
    stats = _calibrate(src, calibration, cfg, max_tokens=max_tokens, offload_dir=offload_dir)
    kept: dict[int, list[int]] = {}
    for layer in layers:
        kept[layer.index] = choose(
            layer,
            tensors,
            method=method,
            n_keep=n_keep,
            groups=groups,
            seed=seed,
            stats=stats.get(layer.index),
            sketch_dim=sketch_dim,
        )
        if progress:
            progress(f"layer {layer.index}: kept experts {kept[layer.index]}")
    plan = plan_tensors(tensors, layers, kept)
    config = pruned_config(cfg, n_keep=n_keep, groups_kept=groups)
    with _staging(dst, force=force) as tmp:
        files = write_checkpoint(
            tmp, plan, metadata=meta or {"format": "pt"}, max_shard_bytes=max_shard_bytes
        )
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        _copy_extras(src, tmp)
        result = _result(
            dst, src, cfg, config, tensors, plan, layers, kept, method, seed, calibration, files
        )
        (tmp / SIDECAR).write_text(json.dumps(result.sidecar(), indent=2) + "\n", encoding="utf-8")
    return result


def _calibrate(
    src: Path,
    calibration: Path | str | None,
    cfg: MoeConfig,
    *,
    max_tokens: int,
    offload_dir: Path | str | None,
) -> dict[int, LayerStats]:
    """Routing statistics per MoE layer from ``calibration`` (none without it)."""
    if calibration is None:
        return {}
    from proxydiag.proxy.calibrate import routing_stats

    offload = None if offload_dir is None else Path(offload_dir)
    return routing_stats(
        src,
        Path(calibration),
        n_experts=cfg.n_experts,
        max_tokens=max_tokens,
        sample_tokens=_SAMPLE_TOKENS,
        offload_dir=offload,
    )


def keep_count(total: int, *, keep_ratio: float | None, n_experts: int | None) -> int:
    """Experts kept per layer; a choice that keeps none, or more than all, is an error.

    >>> keep_count(8, keep_ratio=0.125, n_experts=None)
    1
    >>> keep_count(64, keep_ratio=None, n_experts=6)
    6
    """
    if n_experts is not None:
        if not 1 <= n_experts <= total:
            raise ConfigError(
                f"--experts {n_experts} must be between 1 and the {total} experts per layer"
            )
        return n_experts
    assert keep_ratio is not None
    n_keep = round(total * keep_ratio)
    if n_keep < 1:
        raise ConfigError(
            f"--keep {keep_ratio} keeps 0 of {total} experts per layer; keep at "
            f"least {1 / total:.4g}"
        )
    return n_keep


def _check_args(
    src: Path,
    dst: Path,
    keep_ratio: float | None,
    n_experts: int | None,
    method: str,
    calibration: Path | str | None,
    force: bool,
) -> None:
    if (keep_ratio is None) == (n_experts is None):
        raise ConfigError("give exactly one of --keep RATIO and --experts N")
    if keep_ratio is not None and not 0 < keep_ratio <= 1:
        raise ConfigError(f"--keep {keep_ratio} must be in (0, 1]")
    if method not in METHODS:
        raise ConfigError(f"--method {method!r} is unknown; use one of {', '.join(METHODS)}")
    if method != "kmeans" and calibration is None:
        raise ConfigError(f"--method {method} ranks experts by routing: give --calibration FILE")
    if not src.is_dir():
        raise ConfigError(f"{src}: not a checkpoint folder")
    if dst.resolve() == src.resolve():
        raise ConfigError(f"{dst}: is the checkpoint itself; write the proxy elsewhere")
    if dst.exists() and not force:
        raise ConfigError(f"{dst}: exists; pass --force to replace it")


def plan_tensors(
    tensors: dict[str, TensorInfo], layers: list[MoeLayer], kept: dict[int, list[int]]
) -> list[OutTensor]:
    """The proxy's tensors, in the source's order: kept experts renumbered, rows re-indexed."""
    rename: dict[str, str] = {}
    rows: dict[str, tuple[int, ...]] = {}
    for layer in layers:
        ks = kept[layer.index]
        for new, old in enumerate(ks):
            rename.update(
                {layer.expert_name(old, r): layer.expert_name(new, r) for r in layer.roles}
            )
        rows.update({name: tuple(ks) for name in (*layer.fused, *layer.router)})
    dropped = {
        layer.expert_name(e, r)
        for layer in layers
        for r in layer.roles
        for e in range(layer.n_experts)
    } - set(rename)
    return [
        OutTensor(rename.get(n, n), t, rows.get(n)) for n, t in tensors.items() if n not in dropped
    ]


@contextlib.contextmanager
def _staging(dst: Path, *, force: bool) -> Iterator[Path]:
    """A fresh folder beside ``dst``, moved onto ``dst`` on success and removed on failure."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".{dst.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = dst.parent / f".{dst.name}.replaced-{os.getpid()}"
    if dst.exists() or dst.is_symlink():
        if not force:  # appeared while building
            shutil.rmtree(tmp, ignore_errors=True)
            raise ConfigError(f"{dst}: exists; pass --force to replace it")
        os.replace(dst, old)
    os.replace(tmp, dst)
    if old.is_dir():
        shutil.rmtree(old)
    elif old.exists():
        old.unlink()


def _copy_extras(src: Path, dst: Path) -> None:
    """Tokenizer, generation config, chat template, code: every file but weights and config."""
    for p in src.iterdir():
        if (
            p.is_file()
            and not p.name.endswith(_WEIGHT_SUFFIXES)
            and p.name not in ("config.json", SIDECAR, INDEX_NAME)
            and not p.name.endswith(".index.json")
        ):
            shutil.copy2(p, dst / p.name)


def _result(
    dst: Path,
    src: Path,
    cfg: MoeConfig,
    config: dict[str, object],
    tensors: dict[str, TensorInfo],
    plan: list[OutTensor],
    layers: list[MoeLayer],
    kept: dict[int, list[int]],
    method: str,
    seed: int,
    calibration: Path | str | None,
    files: list[str],
) -> ProxyResult:
    n_keep = len(next(iter(kept.values())))
    top_k = int(config["num_experts_per_tok"])  # type: ignore[call-overload]
    before = count_params(
        [t.numel for t in tensors.values()],
        layers,
        n_active=cfg.top_k,
        n_held=cfg.n_experts,
        tensors=tensors,
    )
    after = count_params(
        [
            t.source.numel * len(t.rows) // t.source.shape[0]
            if t.rows is not None
            else t.source.numel
            for t in plan
        ],
        layers,
        n_active=top_k,
        n_held=n_keep,
        tensors=tensors,
    )
    return ProxyResult(
        out=dst,
        source=src,
        family=cfg.family.name,
        method=method,
        seed=seed,
        experts_total=cfg.n_experts,
        experts_kept=n_keep,
        top_k=top_k,
        kept=tuple((i, tuple(k)) for i, k in sorted(kept.items())),
        total_params=after[0],
        active_params_per_token=after[1],
        source_total_params=before[0],
        source_active_params_per_token=before[1],
        calibration=None if calibration is None else str(calibration),
        files=tuple(files),
    )
