"""Weights & Biases runs without a server: offline run folders (``offline``: the ``.wandb``
record stream, read with the ``wandb`` package) and the CSV a chart exports (``export_csv``:
``Step`` plus ``run - metric`` columns, with their ``__MIN``/``__MAX`` bands)."""
