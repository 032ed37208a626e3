"""Write the committed corpus of real trainer outputs (``tests/data/real/``).

Every run here is trained by a real trainer on CPU: TRL's ``GRPOTrainer`` or a plain
transformers ``Trainer``, on a tiny Qwen2-MoE built from a config (8, 4 or 2 experts) with a
word-level tokenizer built locally by ``tokenizers``. Nothing is downloaded
(``HF_HUB_OFFLINE=1``). Each run logs through transformers' own ``TensorBoardCallback`` and
``MLflowCallback`` (an MLflow file store inside the run), writes ``trainer_state.json`` with
``Trainer.save_state()``, and its console (stdout and stderr) is captured to ``console.log``.

fp16 on CPU: accelerate silently ignores ``fp16=True`` on a CPU (no scaler, no autocast). The
fp16 runs install torch's CPU ``GradScaler`` and fp16 autocast into the Trainer's
``Accelerator`` before training (``_make_fp16``), so overflowing steps are really skipped by the
scaler and the logged ``grad_norm`` is really ``inf``. The only value added to the trainer's own
logs is ``loss_scale``, read from that scaler at each log (DeepSpeed and Megatron log the same
thing); nothing else is written into metrics.

Run from the repository root (a few minutes on 2 cores)::

    HF_HUB_OFFLINE=1 python tests/data/real/generate.py [--only NAME]

See README.md beside this file for the runs, their labels and the warnings left alone.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DISABLE_MLFLOW_INTEGRATION", "FALSE")
os.environ.setdefault("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
# the file store is in "maintenance mode" in MLflow 3 and refuses to open without this opt-out;
# many existing setups still write it, so most runs here use it (two use SQLite)
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

HERE = Path(__file__).resolve().parent
WORDS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]
#: the reward's favourite word: GRPO learns to say it
TARGET = "a"


@dataclass(frozen=True)
class Spec:
    """One run: which trainer, which fault, and the truth written into labels.json."""

    name: str
    trainer: str  # "grpo" | "sft"
    experts: int
    steps: int
    lr: float
    label: str
    group: str
    role: str = "full"
    seed: int = 0
    #: step at which the learning rate is multiplied by ``lr_jump`` (None: no jump)
    lr_jump_step: int | None = None
    lr_jump: float = 1.0
    #: "" (fp32), "dynamic" (GradScaler from 2**32), "static" (a scale that never moves) or
    #: "static-from" (dynamic until ``static_from_step``, then a scale too high that never
    #: moves: every later step overflows, as when a static ``loss_scale`` meets grown gradients)
    fp16: str = ""
    static_scale: float = 2.0**24
    static_from_step: int = 0
    #: the dynamic scaler grows every this many clean steps (each growth may overflow once)
    growth_interval: int = 25
    #: save a checkpoint every this many steps (0: none; the committed corpus keeps none)
    save_steps: int = 0
    onset_step: int | None = None
    #: MLflow backend: "file" (an ``mlruns`` file store) or "sqlite" (``mlflow.db``)
    mlflow_store: str = "file"


SPECS: tuple[Spec, ...] = (
    Spec("grpo-healthy-e8", "grpo", 8, 100, 3e-3, "healthy", "grpo-healthy", mlflow_store="sqlite"),
    Spec("grpo-healthy-e4", "grpo", 4, 60, 3e-3, "healthy", "grpo-healthy", role="proxy"),
    Spec("grpo-healthy-e2", "grpo", 2, 60, 3e-3, "healthy", "grpo-healthy", role="proxy"),
    Spec("grpo-fp16-dynamic-e8", "grpo", 8, 90, 3e-3, "healthy", "grpo-fp16", fp16="dynamic"),
    Spec(
        "grpo-fp16-static-e8",
        "grpo",
        8,
        30,
        3e-3,
        "gradient_overflow",
        "grpo-fp16-static",
        fp16="static",
        onset_step=1,
    ),
    Spec("sft-healthy-e8", "sft", 8, 150, 2e-3, "healthy", "sft"),
    Spec(
        "sft-lrjump-e8",
        "sft",
        8,
        150,
        2e-3,
        "loss_divergence",
        "sft-lrjump",
        lr_jump_step=100,
        lr_jump=500.0,
        onset_step=100,
    ),
    Spec(
        "sft-lrjump-e4",
        "sft",
        4,
        150,
        2e-3,
        "loss_divergence",
        "sft-lrjump",
        lr_jump_step=90,
        lr_jump=500.0,
        onset_step=90,
        role="proxy",
    ),
    Spec("sft-fp16-dynamic-e8", "sft", 8, 200, 2e-3, "healthy", "sft-fp16", fp16="dynamic"),
    Spec(
        "sft-fp16-static-e2",
        "sft",
        2,
        60,
        2e-3,
        "gradient_overflow",
        "sft-fp16-static",
        fp16="static",
        onset_step=1,
    ),
)


def build_tokenizer() -> Any:
    """A word-level tokenizer built in memory (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "<eos>", "<unk>", *WORDS, "say", "count"])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    fast.padding_side = "left"
    fast.chat_template = None
    return fast


def build_model(experts: int, vocab_size: int, seed: int) -> Any:
    """A tiny Qwen2-MoE (2 layers, hidden 32) with ``experts`` routed experts."""
    import torch
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2MoeConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=experts,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
        tie_word_embeddings=True,
    )
    return Qwen2MoeForCausalLM(cfg)


class _StaticScaler:
    """A GradScaler whose scale never moves (DeepSpeed's ``"loss_scale": N``, static)."""

    @staticmethod
    def make(scale: float) -> Any:
        import torch

        class Static(torch.amp.GradScaler):
            def update(self, new_scale: Any = None) -> None:
                super().update(new_scale=float(scale))

        return Static("cpu", init_scale=scale)

    @staticmethod
    def make_from(step: int, growth_interval: int) -> Any:
        """Dynamic until ``step`` optimizer steps, then a static scale of 2^40: every later
        step's gradients overflow and are skipped."""
        import torch

        class StaticFrom(torch.amp.GradScaler):
            calls = 0

            def update(self, new_scale: Any = None) -> None:
                StaticFrom.calls += 1
                if StaticFrom.calls >= step:
                    super().update(new_scale=2.0**40)
                else:
                    super().update(new_scale)

        return StaticFrom("cpu", init_scale=2.0**32, growth_interval=growth_interval)


def _make_fp16(trainer: Any, spec: Spec) -> None:
    """Install a real CPU GradScaler and fp16 autocast into the Trainer's Accelerator.

    accelerate sets ``native_amp`` and a scaler only for non-CPU devices; with them set before
    ``prepare``, the model's forward runs under ``torch.autocast("cpu", torch.float16)``, the
    loss is scaled, gradients are unscaled before clipping and a step with an ``inf`` gradient
    is skipped (``optimizer_step_was_skipped``), exactly as on a GPU.
    """
    import torch

    acc = trainer.accelerator
    assert acc.mixed_precision == "fp16", acc.mixed_precision
    acc.native_amp = True
    if spec.fp16 == "dynamic":
        # Megatron's and torch's start (2**32); a growth window of 25 steps (DeepSpeed and
        # Megatron default to 1000) lets the scale climb back and overflow again within a
        # short run: the isolated skips a healthy fp16 run shows after its calibration burst
        acc.scaler = torch.amp.GradScaler(
            "cpu", init_scale=2.0**32, growth_interval=spec.growth_interval
        )
    elif spec.fp16 == "static-from":
        acc.scaler = _StaticScaler.make_from(spec.static_from_step, spec.growth_interval)
    else:
        acc.scaler = _StaticScaler.make(spec.static_scale)


def _scale_logger(base: type) -> type:
    """The trainer class, logging its scaler's current scale with every log line."""

    class WithScale(base):  # type: ignore[misc, valid-type]
        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            scaler = getattr(self.accelerator, "scaler", None)
            if scaler is not None and "loss" in logs:
                logs["loss_scale"] = float(scaler.get_scale())
            super().log(logs, start_time)

    return WithScale


def _lr_jump(spec: Spec) -> Any:
    """A callback that multiplies every param group's learning rate at ``lr_jump_step``."""
    from transformers import TrainerCallback

    class LrJump(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if spec.lr_jump_step is not None and state.global_step + 1 == spec.lr_jump_step:
                sched = kw["lr_scheduler"]
                sched.base_lrs = [lr * spec.lr_jump for lr in sched.base_lrs]
                opt = kw["optimizer"]
                for group in opt.param_groups:
                    group["lr"] *= spec.lr_jump

    return LrJump()


def _common_args(spec: Spec, out: Path) -> dict[str, Any]:
    return {
        "output_dir": str(out / "trainer"),
        "max_steps": spec.steps,
        "learning_rate": spec.lr,
        "logging_steps": 1,
        "save_strategy": "steps" if spec.save_steps else "no",
        "save_steps": spec.save_steps or 500,
        "report_to": ["tensorboard", "mlflow"],
        "use_cpu": True,
        "seed": spec.seed,
        "fp16": bool(spec.fp16),
        "lr_scheduler_type": "constant",
        "max_grad_norm": 1.0,
        "dataloader_num_workers": 0,
        "run_name": spec.name,
        "disable_tqdm": False,
    }


def _grpo_trainer(spec: Spec, out: Path, tok: Any) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    prompts = [{"prompt": f"say {w} {v}"} for w in WORDS for v in WORDS]

    def reward_target(completions: list[str], **_: Any) -> list[float]:
        """Fraction of the completion's words that are the target word."""
        out_ = []
        for c in completions:
            words = c.split()
            out_.append(sum(w == TARGET for w in words) / max(len(words), 1))
        return out_

    cfg = GRPOConfig(
        **_common_args(spec, out),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        beta=0.04,
        temperature=1.0,
        logging_first_step=True,
    )
    # with beta > 0 TRL loads its reference model from the policy's path: the initial policy
    # is saved inside the run's trainer/ folder (deleted after training: no weights kept)
    init = out / "trainer" / "init_model"
    build_model(spec.experts, len(tok), spec.seed).save_pretrained(init)
    model = str(init)
    cls = _scale_logger(GRPOTrainer)
    return cls(
        model=model,
        reward_funcs=reward_target,
        args=cfg,
        train_dataset=Dataset.from_list(prompts),
        processing_class=tok,
    )


def _sft_trainer(spec: Spec, out: Path, tok: Any) -> Any:
    import random

    from datasets import Dataset
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    rng = random.Random(spec.seed)
    # a learnable language: each sentence counts up the alphabet from a random start
    texts = []
    for _ in range(2000):
        start = rng.randrange(len(WORDS) - 6)
        texts.append("count " + " ".join(WORDS[start : start + 6]))
    ds = Dataset.from_dict(dict(tok(texts)))
    args = TrainingArguments(**_common_args(spec, out), per_device_train_batch_size=16)
    model = build_model(spec.experts, len(tok), spec.seed)
    cls = _scale_logger(Trainer)
    return cls(
        model=model,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        data_collator=DataCollatorForLanguageModeling(tok, mlm=False),
    )


def run_one(spec: Spec) -> None:
    """Train one run into ``HERE/<name>/`` and keep only its small outputs."""
    out = HERE / spec.name
    shutil.rmtree(out, ignore_errors=True)
    train(spec, out)
    shutil.copy(out / "trainer" / "trainer_state.json", out / "trainer_state.json")
    shutil.rmtree(out / "trainer")
    shutil.rmtree(out / "mlartifacts", ignore_errors=True)
    _sidecar(spec, out)


def train(spec: Spec, out: Path, callbacks: tuple[Any, ...] = ()) -> Any:
    """Train ``spec`` into ``out`` (TensorBoard ``runs/``, MLflow, ``console.log``, the
    trainer's ``trainer/`` folder with its checkpoints and state) with ``callbacks`` added;
    the trainer."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ["MLFLOW_TRACKING_URI"] = (
        f"sqlite:///{out / 'mlflow.db'}"
        if spec.mlflow_store == "sqlite"
        else (out / "mlruns").as_uri()
    )
    os.environ["MLFLOW_EXPERIMENT_NAME"] = spec.group
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(out / "runs")
    tok = build_tokenizer()
    log = out / "console.log"
    with log.open("w", encoding="utf-8", buffering=1) as fh, _tee(fh):
        trainer = (_grpo_trainer if spec.trainer == "grpo" else _sft_trainer)(spec, out, tok)
        if spec.fp16:
            _make_fp16(trainer, spec)
        if spec.lr_jump_step is not None:
            trainer.add_callback(_lr_jump(spec))
        for callback in callbacks:
            trainer.add_callback(callback)
            if hasattr(callback, "attach"):  # a callback that logs through the trainer
                callback.attach(trainer)
        trainer.train()
        trainer.save_state()
    return trainer


@contextlib.contextmanager
def _tee(fh: io.TextIOBase) -> Any:
    """Send stdout, stderr and the warnings/logging streams to ``fh`` (the console capture)."""
    import logging

    old_out, old_err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = fh  # type: ignore[assignment]
    handler = logging.StreamHandler(fh)
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            yield
    finally:
        logging.getLogger().removeHandler(handler)
        sys.stdout, sys.stderr = old_out, old_err


def _sidecar(spec: Spec, out: Path) -> None:
    side = {
        "name": spec.name,
        "role": spec.role,
        "group": spec.group,
        "seed": spec.seed,
        "experts_kept": spec.experts,
        "experts_total": 8,
        "log_interval": 1,
        "precision": "fp16" if spec.fp16 else "fp32",
    }
    (out / "proxydiag.json").write_text(json.dumps(side, indent=1) + "\n", encoding="utf-8")


SOURCES = {
    "tensorboard": "runs",
    "mlflow": "mlruns",
    "mlflow-sqlite": "mlflow.db",
    "trainer_state": "trainer_state.json",
    "console": "console.log",
}


def write_labels() -> None:
    """labels.json: one entry per source of each run (docs/architecture.md, 'Labelled corpora')."""
    runs: dict[str, Any] = {}
    for spec in SPECS:
        for fmt, rel in SOURCES.items():
            if not (HERE / spec.name / rel).exists():
                continue
            runs[f"{spec.name}.{fmt}"] = {
                "path": f"{spec.name}/{rel}",
                "format": fmt.split("-")[0],
                "naming": "hf",
                "role": spec.role,
                "group": spec.group,
                "seed": spec.seed,
                "experts_kept": spec.experts,
                "experts_total": 8,
                "precision": "fp16" if spec.fp16 else "fp32",
                "label": spec.label,
                "onset_step": spec.onset_step,
                "variant": spec.trainer,
                "log_interval": 1,
                "n_steps": spec.steps,
                "relation": "",
            }
    text = json.dumps({"runs": runs, "pairs": {}}, indent=1, sort_keys=True) + "\n"
    (HERE / "labels.json").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    import torch

    torch.set_num_threads(1)  # a tiny model: threads only add overhead on a shared machine
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", help="run only these names (repeatable)")
    ns = p.parse_args(argv)
    for spec in SPECS:
        if ns.only and spec.name not in ns.only:
            continue
        print(f"training {spec.name} ...", flush=True)
        run_one(spec)
    write_labels()


if __name__ == "__main__":
    main()
