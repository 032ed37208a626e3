"""What the three MLflow readers share: run metadata from params/tags, MLflow's value encoding.

MLflow keeps no metadata schema, so proxydiag's run attributes (role, group, seed, experts
kept, ...) are looked up by name among a run's tags first, then its params, each also with a
``proxydiag.`` prefix (a user's tag beats a hyper-parameter of the same name).

SQL stores cannot hold infinities: MLflow writes ``±1.7976931348623157e308`` instead
(``sqlalchemy_store._get_metric_value_details``) and NaN as ``value=0, is_nan=1``.
:func:`decode_values` turns both back into the IEEE values that were logged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from proxydiag.errors import IngestWarning
from proxydiag.run import slug

#: what MLflow's SQL store writes for +inf (and, negated, for -inf)
SQL_INF = 1.7976931348623157e308

#: tag holding the run name (MLflow's ``MLFLOW_RUN_NAME``)
RUN_NAME_TAG = "mlflow.runName"

#: metrics proxydiag itself logs back (``proxydiag.fidelity`` ...): results, not training data,
#: so the readers leave them out
OWN_PREFIX = "proxydiag."


def _int_or_float(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


_FIELDS: dict[str, Callable[[str], Any]] = {
    "role": str,
    "group": str,
    "seed": int,
    "experts_kept": _int_or_float,
    "experts_total": _int_or_float,
    "cost_per_step": float,
    "precision": str,
    "step_kind": str,
    "log_interval": int,
}


def metadata(params: Mapping[str, str], tags: Mapping[str, str], *, where: str) -> dict[str, Any]:
    """proxydiag attrs found in a run's tags and params.

    ``where`` names the run in warnings (a value that does not convert is warned about and
    left out, never guessed).

    >>> metadata({"experts_kept": "16", "lr": "1e-6"}, {"role": "proxy"}, where="r")
    {'role': 'proxy', 'experts_kept': 16}
    """
    out: dict[str, Any] = {}
    for name, convert in _FIELDS.items():
        for source, key in (
            (tags, name),
            (tags, f"proxydiag.{name}"),
            (params, name),
            (params, f"proxydiag.{name}"),
        ):
            if key not in source:
                continue
            try:
                out[name] = convert(source[key].strip())
            except ValueError:
                warnings.warn(
                    IngestWarning(f"{where}: {key}={source[key]!r} is not a valid {name}; ignored"),
                    stacklevel=3,
                )
            break
    return out


def run_attrs(
    *,
    mlflow_run_id: str,
    experiment_id: str | None,
    tracking_uri: str,
    params: Mapping[str, str],
    tags: Mapping[str, str],
    where: str,
) -> dict[str, Any]:
    """The attrs every MLflow reader gives a run (``mlflow_*`` keys locate it for write-back)."""
    attrs: dict[str, Any] = {
        "params": dict(params),
        "tags": dict(tags),
        "mlflow_run_id": mlflow_run_id,
        "mlflow_experiment_id": experiment_id,
        "mlflow_tracking_uri": tracking_uri,
    }
    attrs.update(metadata(params, tags, where=where))
    return attrs


def has_points(raw: pl.DataFrame, *, where: str) -> bool:
    """False (with a warning) for a run that logged no metric points: it is skipped."""
    if raw.height:
        return True
    warnings.warn(IngestWarning(f"{where}: MLflow run has no metric points; skipped"), stacklevel=3)
    return False


def proxydiag_run_id(name: str, mlflow_run_id: str) -> str:
    """A stable proxydiag run id: the same MLflow run gets the same id however it is read.

    >>> proxydiag_run_id("proxy 25%", "0123456789abcdef0123456789abcdef")
    'proxy_25-01234567'
    """
    return f"{slug(name, max_len=60)}-{mlflow_run_id[:8]}"


def decode_values(value: pl.Expr, is_nan: pl.Expr | None = None) -> pl.Expr:
    """NaN from ``is_nan`` and ±inf from MLflow's ±1.7976931348623157e308 sentinel.

    >>> df = pl.DataFrame({"v": [0.0, SQL_INF, -SQL_INF, 2.5], "n": [True, False, False, False]})
    >>> df.select(decode_values(pl.col("v"), pl.col("n")))["value"].to_list()
    [nan, inf, -inf, 2.5]
    """
    decoded = (
        pl.when(value == SQL_INF)
        .then(math.inf)
        .when(value == -SQL_INF)
        .then(-math.inf)
        .otherwise(value)
    )
    if is_nan is not None:
        decoded = pl.when(is_nan.cast(pl.Boolean)).then(math.nan).otherwise(decoded)
    return decoded.alias("value")
