"""``proxydiag proxy build``: an expert-pruned proxy of a Hugging Face MoE checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import err, out, sub_app

proxy_app = sub_app("proxy", "Make proxies: expert-pruned copies of MoE checkpoints.")


@proxy_app.command("build")
def proxy_build(
    checkpoint: Annotated[Path, typer.Argument(help="Hugging Face checkpoint folder")],
    output: Annotated[Path, typer.Option("-o", "--out", help="proxy checkpoint folder")],
    keep: Annotated[
        float | None,
        typer.Option("--keep", help="fraction of each layer's routed experts kept, e.g. 0.25"),
    ] = None,
    experts: Annotated[
        int | None,
        typer.Option("--experts", help="routed experts kept per layer (instead of --keep)"),
    ] = None,
    method: Annotated[str, typer.Option(help="kmeans | frequency | reap")] = "kmeans",
    calibration: Annotated[
        Path | None,
        typer.Option(
            help="text (one sample per line) or JSONL with 'text'; run through the model on CPU"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seeds clustering and sketches")] = 0,
    max_tokens: Annotated[int, typer.Option(help="calibration tokens read at most")] = 4096,
    offload_dir: Annotated[
        Path | None,
        typer.Option(
            help="calibrate one decoder layer at a time from disk, using DIR for converted weights "
            "(RAM ~ one layer)"
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="replace OUT if it exists")] = False,
) -> None:
    """Keep --keep RATIO (or --experts N) of the routed experts in every MoE layer; write OUT
    (loads with transformers' from_pretrained) and its proxydiag.json sidecar."""
    from proxydiag.proxy import build

    result = build(
        checkpoint,
        output,
        keep_ratio=keep,
        n_experts=experts,
        method=method,
        calibration=calibration,
        seed=seed,
        force=force,
        max_tokens=max_tokens,
        offload_dir=offload_dir,
        progress=lambda line: err.print(line, markup=False),
    )
    out.print(
        f"{result.out}: {result.family}, kept {result.experts_kept} of {result.experts_total} "
        f"experts in {len(result.kept)} MoE layers ({result.method}, seed {result.seed}); "
        f"params {result.total_params:,} of {result.source_total_params:,} "
        f"(cost/step {result.cost_per_step}), active per token "
        f"{result.active_params_per_token:,}",
        markup=False,
    )
