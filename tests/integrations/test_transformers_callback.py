"""ProxydiagCallback in a real tiny transformers Trainer on CPU (nothing downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from proxydiag.integrations.transformers import ALERT_FILE, ProxydiagCallback  # noqa: E402

#: a real training loop on CPU takes about a minute
pytestmark = pytest.mark.slow

STEPS = 120
JUMP_STEP = 70


def _tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer built locally from a tiny vocabulary."""
    words = [f"w{i}" for i in range(60)]
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]"
    )


class _Texts(torch.utils.data.Dataset):  # type: ignore[misc]
    """Sentences of a repeating pattern: a model can learn them, so the loss falls."""

    def __init__(self, tok: transformers.PreTrainedTokenizerFast, n: int = 256) -> None:
        gen = torch.Generator().manual_seed(0)
        self.rows = []
        for _ in range(n):
            start = int(torch.randint(0, 50, (1,), generator=gen))
            text = " ".join(f"w{(start + k) % 60}" for k in range(16))
            ids = tok(text)["input_ids"]
            self.rows.append({"input_ids": torch.tensor(ids), "labels": torch.tensor(ids)})

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.rows[i]


def _train(tmp_path: Path, *, jump: bool, stop_on: tuple[str, ...] = ()) -> ProxydiagCallback:
    torch.manual_seed(0)
    tok = _tokenizer()
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    model = transformers.LlamaForCausalLM(cfg)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        lr_scheduler_type="constant",
        max_grad_norm=1e9,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # a real injected fault: the learning rate jumps 300x at JUMP_STEP and stays there
    scale = (lambda s: 1.0 if s < JUMP_STEP else 300.0) if jump else (lambda s: 1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scale)
    guard = ProxydiagCallback(stop_on=stop_on)
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=_Texts(tok),
        optimizers=(optimizer, scheduler),
        callbacks=[guard],
    )
    guard.attach(trainer)
    trainer.train()
    return guard


def test_healthy_run_raises_nothing(tmp_path: Path) -> None:
    guard = _train(tmp_path, jump=False)
    assert guard.alerts == []
    assert guard.final is not None and guard.final.label == "healthy"


def test_learning_rate_jump_is_caught_stops_and_tags_a_checkpoint(tmp_path: Path) -> None:
    guard = _train(tmp_path, jump=True, stop_on=("loss_divergence", "gradient_overflow"))
    assert guard.alerts, "the lr jump raised no alert"
    first = guard.alerts[0]
    assert first.label in ("loss_divergence", "gradient_overflow")
    assert first.onset_step is not None and abs(first.onset_step - JUMP_STEP) <= 10
    assert first.raised_at_step - JUMP_STEP <= 40
    tagged = list((tmp_path / "out").glob(f"checkpoint-*/{ALERT_FILE}"))
    assert len(tagged) == 1
    assert json.loads(tagged[0].read_text())["class"] == first.label
    assert guard.final is not None and guard.final.label == first.label
