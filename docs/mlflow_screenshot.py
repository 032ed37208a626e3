"""Regenerate ``docs/img/mlflow-compare.png``: proxydiag fidelity vs experts kept in MLflow's UI.

Starts a throwaway ``mlflow server`` (sqlite, 127.0.0.1, telemetry off), logs a proxy sweep
(a full run with an fp16 overflow and proxies keeping 48...4 of 64 experts), diagnoses and
compares them with proxydiag, logs the results back, then opens the runs' compare view in
headless Chromium (Debian ``chromium`` + ``chromedriver``), picks the scatter plot of
``proxydiag.fidelity`` against ``experts_kept`` and saves the screenshot.

    .venv/bin/python docs/mlflow_screenshot.py [OUT.png]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from proxydiag.errors import MlflowError
from proxydiag.testing.mlflow_server import start

os.environ.update(MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true")

KEEP = (64, 48, 32, 16, 8, 4)
METRICS = ["loss", "grad_norm", "loss_scale", "skipped", "reward", "entropy", "kl"]


def log_sweep(uri: str) -> tuple[str, list[str]]:
    """Log the sweep, analyse it with proxydiag, log the results back; (experiment, proxy ids)."""
    import polars as pl
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    import proxydiag
    from proxydiag.ingest.mlflow import uri as mlflow_uri
    from proxydiag.mlflow.sink import log_comparison, log_diagnosis
    from proxydiag.synth import simulate
    from proxydiag.synth.scenario import named

    client = MlflowClient(uri)
    exp_id = client.create_experiment("moe-proxy-sweep")
    scenario = named("fp16_scaler_collapse", n_steps=300)
    for kept in KEEP:
        role = "full" if kept == 64 else "proxy"
        sim = simulate(replace(scenario, experts_kept=kept, role=role, group="sweep",
                               dynamics="normal" if kept >= 16 else "volatile"), seed=kept)
        rows = (sim.run.frame.filter(pl.col("metric").is_in(METRICS))
                .select("metric", "step", "value", "wall_time").iter_rows())
        metrics = [Metric(k, v, int(1000 * (w or 0)), s) for k, s, v, w in rows]
        rid = client.create_run(exp_id, run_name=f"{role}-{kept}experts",
                                tags={"role": role, "group": "sweep"}).info.run_id
        for i in range(0, len(metrics), 1000):
            client.log_batch(rid, metrics=metrics[i:i + 1000])
        client.log_batch(rid, params=[Param("experts_kept", str(kept))])
        client.set_terminated(rid)
    full = mlflow_uri.search("moe-proxy-sweep", "tags.role = 'full'", tracking_uri=uri)[0]
    proxies = mlflow_uri.search("moe-proxy-sweep", "tags.role = 'proxy'", tracking_uri=uri)
    log_diagnosis(proxydiag.diagnose(full), full, tracking_uri=uri)
    for proxy in proxies:
        log_comparison(proxydiag.compare(full, proxy), proxy, full, tracking_uri=uri)
    return exp_id, [str(p.attrs["mlflow_run_id"]) for p in proxies]


def screenshot(uri: str, exp_id: str, run_ids: list[str], out: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,860",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        driver.get(f"{uri}/#/compare-runs?runs={json.dumps(run_ids)}"
                   f"&experiments={json.dumps([exp_id])}")
        time.sleep(10)
        for button in driver.find_elements(By.CSS_SELECTOR, "button[aria-label=Close]"):
            button.click()  # the assistant side panel
        driver.find_element(By.XPATH, "//*[text()='Scatter Plot']").click()
        time.sleep(2)
        driver.find_element(By.XPATH, "//*[normalize-space(text())='Y-axis:']/following::"
                                      "*[contains(@class,'select') or @role='combobox'][1]").click()
        time.sleep(1)
        option = driver.find_element(By.XPATH, "//*[@role='option' and normalize-space(.)="
                                               "'proxydiag.fidelity']")
        driver.execute_script("arguments[0].scrollIntoView(true);", option)
        option.click()
        time.sleep(3)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "img" / "mlflow-compare.png")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            server = start(Path(tmp))
        except MlflowError as exc:
            raise SystemExit(str(exc)) from exc
        with server:
            exp_id, ids = log_sweep(server.uri)
            screenshot(server.uri, exp_id, ids, out)
    print(f"wrote {out} ({out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
