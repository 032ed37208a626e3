"""Tiny MoE checkpoints of every supported family, built from their config classes and saved
with ``save_pretrained`` (nothing downloaded), with a word-level tokenizer made locally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORDS = [
    "the",
    "a",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "cat",
    "dog",
    "bird",
    "fish",
    "runs",
    "walks",
    "eats",
    "sleeps",
    "red",
    "blue",
    "green",
    "big",
    "small",
    "fast",
    "slow",
    "and",
    "or",
    "but",
    "on",
    "in",
    "under",
    "over",
    "is",
    "was",
    "very",
    "not",
]
VOCAB = 64
COMMON: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
    tie_word_embeddings=False,
)
MLA: dict[str, Any] = dict(
    kv_lora_rank=16,
    q_lora_rank=16,
    qk_rope_head_dim=8,
    qk_nope_head_dim=8,
    v_head_dim=8,
    moe_intermediate_size=16,
    n_shared_experts=1,
    first_k_dense_replace=1,
)
#: DeepSeek's latent attention has no grouped key/value heads
MLA_COMMON = COMMON | {"num_key_value_heads": COMMON["num_attention_heads"]}
FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3")


def config(family: str, **extra: Any) -> Any:
    """The transformers config of a tiny 8-expert, top-2 model of ``family``."""
    import transformers as tf

    if family == "mixtral":
        return tf.MixtralConfig(**COMMON, num_local_experts=8, num_experts_per_tok=2, **extra)
    if family in ("qwen2_moe", "qwen3_moe", "olmoe"):
        cls = {
            "qwen2_moe": tf.Qwen2MoeConfig,
            "qwen3_moe": tf.Qwen3MoeConfig,
            "olmoe": tf.OlmoeConfig,
        }[family]
        more = {"moe_intermediate_size": 16} if family != "olmoe" else {}
        if family == "qwen2_moe":
            more["shared_expert_intermediate_size"] = 32
        return cls(**COMMON, num_experts=8, num_experts_per_tok=2, **more, **extra)
    if family == "deepseek_v2":
        return tf.DeepseekV2Config(
            **MLA_COMMON, **MLA, n_routed_experts=8, num_experts_per_tok=2, **extra
        )
    groups = {"n_group": 2, "topk_group": 1} | extra
    return tf.DeepseekV3Config(
        **MLA_COMMON, **MLA, n_routed_experts=8, num_experts_per_tok=2, **groups
    )


def tokenizer() -> Any:
    """A word-level fast tokenizer over :data:`WORDS`, built locally."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[BOS]", "[EOS]", "[UNK]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        bos_token="[BOS]",
        eos_token="[EOS]",
    )


def save_model(family: str, folder: Path, *, seed: int = 0, **extra: Any) -> Path:
    """Save a randomly initialised tiny ``family`` model and the tokenizer into ``folder``."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config(family, **extra))
    with torch.no_grad():  # DeepSeek-V3's correction bias starts at zero: make it re-indexable
        for name, buf in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buf.copy_(torch.linspace(-0.1, 0.1, buf.numel()))
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return folder


def load(folder: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).eval()


def moe_blocks(model: Any) -> dict[int, Any]:
    """Layer index -> the MoE block (the module holding ``experts`` and ``gate``)."""
    return {
        i: layer.mlp for i, layer in enumerate(model.model.layers) if hasattr(layer.mlp, "experts")
    }
