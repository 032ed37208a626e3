"""fp16 gradients with a dynamic loss scaler (DeepSpeed/Megatron semantics).

The learner keeps fp32 master weights; gradients are produced in fp16 from the scaled loss
(``(grad * scale).half()``), so values beyond fp16's range (65504) overflow to inf exactly
as on a device. On overflow the step is skipped and the scale halves (after hysteresis);
after ``window_steps`` clean steps it doubles (DeepSpeed ``DynamicLossScaler`` defaults,
runtime/fp16/loss_scaler.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossScaler:
    scale: float = 2.0**16
    window_steps: int = 200
    hysteresis: int = 2
    min_scale: float = 1.0
    dynamic: bool = True
    _clean: int = 0
    _hyst_left: int = 2

    def unscale_fp16(self, params: list[torch.nn.Parameter]) -> bool:
        """Round the scaled gradients through fp16, unscale them in place; True if finite."""
        finite = True
        for p in params:
            if p.grad is None:
                continue
            g16 = (p.grad * self.scale).to(torch.float16)
            if not torch.isfinite(g16).all():
                finite = False
            p.grad = g16.to(torch.float32) / self.scale
        return finite

    def update(self, *, overflow: bool) -> None:
        if not self.dynamic:
            return
        if overflow:
            self._clean = 0
            self._hyst_left -= 1
            if self._hyst_left <= 0:
                self.scale = max(self.scale / 2.0, self.min_scale)
            return
        self._clean += 1
        if self._clean >= self.window_steps:
            self.scale *= 2.0
            self._clean = 0
            self._hyst_left = self.hysteresis
