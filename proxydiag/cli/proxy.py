"""``proxydiag proxy build``: an expert-pruned proxy of a Hugging Face MoE checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import err, out, sub_app
from proxydiag.cli._options import (
    CalibrationOpt,
    ExpertsOpt,
    ForceOpt,
    KeepOpt,
    MaxTokensOpt,
    MethodOpt,
    OffloadDirOpt,
    OutputOpt,
    PruneMethod,
    SeedOpt,
)

proxy_app = sub_app("proxy", "Make proxies: expert-pruned copies of MoE checkpoints.")


@proxy_app.command("build")
def proxy_build(
    checkpoint: Annotated[Path, typer.Argument(help="Hugging Face checkpoint folder")],
    output: OutputOpt,
    keep: KeepOpt = None,
    experts: ExpertsOpt = None,
    method: MethodOpt = PruneMethod.kmeans,
    calibration: CalibrationOpt = None,
    seed: SeedOpt = 0,
    max_tokens: MaxTokensOpt = 4096,
    offload_dir: OffloadDirOpt = None,
    force: ForceOpt = False,
) -> None:
    """Keep --keep RATIO (or --experts N) of the routed experts in every MoE layer; write the
    proxy checkpoint to OUTPUT (loads with transformers' from_pretrained) with its
    proxydiag.json sidecar (--force replaces an OUTPUT that exists)."""
    from proxydiag.proxy import build

    result = build(
        checkpoint,
        output,
        keep_ratio=keep,
        n_experts=experts,
        method=str(method),
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
