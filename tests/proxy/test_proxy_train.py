"""A pruned proxy is trainable: a few SFT steps with TRL on CPU change its kept experts and
router, and the loss is finite (the step a user's stack takes after ``proxy build``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from _proxy_models import WORDS, load, save_model  # noqa: E402

from proxydiag.proxy import build  # noqa: E402


# transformers 5.24 warns when TRL 1.16's SFTConfig sets its deprecated gradient_checkpointing
@pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")
def test_proxy_trains_a_few_steps_with_trl(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    build(save_model("qwen3_moe", tmp_path / "full"), tmp_path / "proxy", keep_ratio=0.25)
    model, tok = load(tmp_path / "proxy"), AutoTokenizer.from_pretrained(tmp_path / "proxy")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rng = np.random.default_rng(0)
    data = datasets.Dataset.from_dict(
        {"text": [" ".join(rng.choice(WORDS, size=10)) for _ in range(16)]}
    )
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        max_length=16,
        dataloader_num_workers=0,
        seed=0,
        disable_tqdm=True,
    )
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert any(".experts." in n for n in changed) and any(".gate." in n for n in changed)
