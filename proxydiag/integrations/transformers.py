"""`ProxydiagCallback`: the live guard inside a Hugging Face ``Trainer`` (and TRL's trainers).

Every ``on_log`` feeds the logged numbers to a :class:`~proxydiag.watch.watcher.Watcher` at
``state.global_step``. An alert is logged through the trainer's own loggers (``trainer.log``
reaches TensorBoard, W&B, MLflow ... as ``proxydiag/<class>/onset_step`` and ``/confidence``;
attach the trainer with :meth:`ProxydiagCallback.attach`), through ``transformers``' logger,
and kept in ``state.log_history``. Every alert names the last of the trainer's checkpoints
(``output_dir/checkpoint-N``) at or before its onset, less a margin that fits the run's length,
and the batches to skip from there, and is written beside the checkpoints
(``output_dir/proxydiag_alert.json``). With ``stop_on=("loss_divergence", ...)`` an alert of
those classes stops training and saves a checkpoint, tagged with the alert (the same file in
that checkpoint's folder: the state at the alert, not one to go back to). At the end of
training, :attr:`ProxydiagCallback.final` is the offline diagnosis of the whole log history.

Usage::

    from proxydiag.integrations.transformers import ProxydiagCallback

    guard = ProxydiagCallback(stop_on=("loss_divergence", "gradient_overflow"))
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[guard])
    guard.attach(trainer)  # optional: alerts also go to the trainer's loggers
    trainer.train()
    print(guard.alerts, guard.final.label)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError, MissingExtraError

try:
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise MissingExtraError("transformers", "trainers") from exc

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.result import LABELS, Diagnosis
from proxydiag.watch.alerts import Alert
from proxydiag.watch.checkpoints import MARGIN_STEPS, Checkpoints
from proxydiag.watch.watcher import Watcher

logger = hf_logging.get_logger("proxydiag")
#: the file that tags a checkpoint saved because of an alert
ALERT_FILE = "proxydiag_alert.json"


class ProxydiagCallback(TrainerCallback):  # type: ignore[misc]
    """Feed the trainer's logs to a watcher; act on its alerts (see the module docstring)."""

    def __init__(
        self,
        *,
        stop_on: Iterable[str] = (),
        config: DiagnoseConfig | None = None,
        precision: str | None = None,
        run_name: str | None = None,
        margin_steps: int = MARGIN_STEPS,
    ) -> None:
        self.stop_on = tuple(stop_on)
        bad = [c for c in self.stop_on if c not in LABELS[1:]]
        if bad:
            raise ConfigError(f"stop_on {bad[0]!r}: use {', '.join(LABELS[1:])}")
        self.config = config or DiagnoseConfig()
        self.precision, self.run_name = precision, run_name
        self.margin_steps = margin_steps
        self.watcher: Watcher | None = None
        self.alerts: list[Alert] = []
        self.final: Diagnosis | None = None
        self._trainer: Any = None
        self._logging = False
        self._stop_alert: Alert | None = None

    def attach(self, trainer: Any) -> ProxydiagCallback:
        """Log alerts through ``trainer.log`` too (adds the callback when missing)."""
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self._trainer = trainer
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        name = self.run_name or getattr(args, "run_name", None) or str(args.output_dir)
        precision = self.precision or (
            "fp16"
            if getattr(args, "fp16", False)
            else "bf16"
            if getattr(args, "bf16", False)
            else None
        )
        self.watcher = Watcher(
            run=name,
            name=name,
            config=self.config,
            precision=precision,
            # the trainer's own checkpoints, read again at every alert
            checkpoints=Checkpoints.scan(args.output_dir, margin_steps=self.margin_steps),
        )

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if self._logging or not logs or self.watcher is None:
            return
        for alert in self.watcher.update(int(state.global_step), logs):
            self._report(alert, state, control)
            _write_alert(Path(args.output_dir), alert)
            if alert.label in self.stop_on and self._stop_alert is None:
                self._stop_alert = alert
                control.should_training_stop = True
                control.should_save = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._stop_alert is None:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            _write_alert(folder, self._stop_alert)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.watcher is None:
            return
        for alert in self.watcher.close():
            self._report(alert, state, control)
        self.final = self.watcher.final(
            history_run(state.log_history, name=self.watcher.name, precision=self.watcher.precision)
        )

    def _report(self, alert: Alert, state: Any, control: Any) -> None:
        self.alerts.append(alert)
        logger.warning("proxydiag: %s", alert.summary or alert.label)
        state.log_history.append(
            {"step": int(state.global_step), "proxydiag/alert": alert.to_dict()}
        )
        if self._trainer is not None:
            # straight to the trainer's loggers (TensorBoard, MLflow, W&B ...): not through
            # trainer.log, which TRL's trainers extend with the step's pending metrics, so
            # called from inside their log it logged the step's metrics a second time
            self._logging = True
            try:
                self._trainer.callback_handler.on_log(
                    self._trainer.args,
                    state,
                    control,
                    {
                        f"proxydiag/{alert.label}/onset_step": float(alert.onset_step or 0),
                        f"proxydiag/{alert.label}/confidence": float(alert.confidence),
                    },
                )
            finally:
                self._logging = False


def _write_alert(folder: Path, alert: Alert) -> None:
    """``folder/proxydiag_alert.json``: the alert with where to go back to (atomically)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{ALERT_FILE}.tmp"
    tmp.write_text(json.dumps(alert.to_dict(), indent=1), encoding="utf-8")
    tmp.replace(folder / ALERT_FILE)


def history_run(history: list[dict[str, Any]], *, name: str, precision: str | None = None) -> Any:
    """A :class:`~proxydiag.run.Run` of a trainer's ``log_history``: the ``trainer_state.json``
    reader's conversion (:func:`proxydiag.ingest.tabular.trainer_state.history_run`), so the
    final diagnosis and a later read of the run's ``trainer_state.json`` agree."""
    from proxydiag.ingest.tabular.trainer_state import history_run as convert

    return convert(
        history, name=name, source=name, attrs={"precision": precision} if precision else {}
    )
