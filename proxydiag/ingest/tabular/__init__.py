"""Metric tables: CSV/TSV (``csv``, and its monitor-file variant ``csv_monitor``), JSON Lines
(``jsonl``), Parquet (``parquet``) and the Hugging Face ``trainer_state.json`` log history
(``trainer_state``), wide (one column per metric) or long (step, key, value); the layout and
value rules they share are in ``tables``."""
