"""Multirun sweeps: the summary of a sweep dir (CSV, Markdown, a plot) and the Hydra
callback that writes it when a sweep ends.

``train-report SWEEP_DIR`` (or ``python -m trainer.sweep.report SWEEP_DIR``) rebuilds the
summary of any sweep dir, also one that is still running. Each job dir holds its
``.hydra/overrides.yaml``, ``metrics.json`` (status ``finished``, ``failed`` or
``preempted``) and ``metrics.jsonl`` (the learning curve).
"""

import argparse
import contextlib
import csv
import logging
import math
import os
import sys
from typing import Dict, List, Optional

import yaml
from hydra.experimental.callback import Callback

from trainer.errors import RecordError
from trainer.records import eval_key, read_json, read_rows

log = logging.getLogger("trainer")

NOT_SWEPT = {"hydra.sweep.dir", "hydra.sweep.subdir"}


def direction_of(objective: str, direction: str = "auto") -> str:
    """``maximize`` or ``minimize`` for an eval metric; ``auto``: minimize losses and errors."""
    if direction in ("maximize", "minimize"):
        return direction
    return "minimize" if any(word in objective for word in ("loss", "error")) else "maximize"


def _read_yaml(path: str, default):
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except (OSError, ValueError, yaml.YAMLError):
        return default


def collect(sweep_dir: str) -> List[Dict]:
    """One row per job dir of ``sweep_dir``: its overrides, status and metrics."""
    rows = []
    for name in sorted(os.listdir(sweep_dir)):
        job_dir = os.path.join(sweep_dir, name)
        if os.path.islink(job_dir) or name.startswith("."):
            continue  # outputs/.latest (or an earlier version's outputs/latest link): not a run
        overrides = _read_yaml(os.path.join(job_dir, ".hydra", "overrides.yaml"), None)
        if not os.path.isdir(job_dir) or overrides is None:
            continue
        odd = ""
        if not isinstance(overrides, list):
            overrides, odd = [], ".hydra/overrides.yaml is not a list of overrides"
        overrides = [str(o) for o in overrides]
        metrics = read_json(os.path.join(job_dir, "metrics.json"))
        config = _read_yaml(os.path.join(job_dir, ".hydra", "config.yaml"), {}) or {}
        eval_cfg = config.get("eval", {}) if isinstance(config, dict) else {}
        eval_cfg = eval_cfg if isinstance(eval_cfg, dict) else {}
        objective = metrics.get("objective") if isinstance(metrics.get("objective"), str) else None
        objective = objective or str(eval_cfg.get("objective") or "accuracy")
        row = {
            "job": name,
            "overrides": " ".join(o for o in overrides if o.split("=", 1)[0] not in NOT_SWEPT),
            "params": dict(o.split("=", 1) for o in overrides if "=" in o and o.split("=", 1)[0] not in NOT_SWEPT),
            "status": metrics.get("status", "running" if os.path.exists(os.path.join(job_dir, "metrics.jsonl")) else "pending"),
            "global_step": metrics.get("global_step"),
            "steps_per_sec": metrics.get("steps_per_sec"),
            "wall_secs": metrics.get("wall_secs"),
            "objective": objective,
            "direction": direction_of(objective, str(eval_cfg.get("direction", "auto"))),
            "error": "; ".join(e for e in (odd, str(metrics.get("error") or "")) if e),
            "job_dir": job_dir,
        }
        row.update({k: v for k, v in metrics.items() if k.startswith("eval_")})
        rows.append(row)
    return _sorted(rows)


def _sorted(rows: List[Dict]) -> List[Dict]:
    """Finished jobs by their objective (best first), then the others."""
    def key(row):
        value = _objective_value(row)
        if row["status"] != "finished" or value is None:
            return (1, 0.0)
        return (0, -value if row["direction"] == "maximize" else value)

    return sorted(rows, key=key)


def _objective_value(row: Dict) -> Optional[float]:
    """The row's objective as a finite number; None for a missing, NaN, infinite or non-numeric one
    (such a job is never "best")."""
    value = row.get(eval_key(row["objective"]))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _columns(rows: List[Dict]) -> List[str]:
    evals = sorted({k for r in rows for k in r if k.startswith("eval_")})
    return ["job", "overrides", "status", "global_step", *evals, "steps_per_sec", "wall_secs", "error"]


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1000 else f"{value:.1f}"
    return "" if value is None else str(value)


def is_sweep(folder: str) -> bool:
    """A dir Hydra ran a sweep in (its ``multirun.yaml``; Optuna's sweeper writes none, but the command
    records its swept keys in ``.swept_keys``), rather than a dir of single runs (``outputs``)."""
    return any(os.path.isfile(os.path.join(folder, name)) for name in ("multirun.yaml", ".swept_keys"))


def summary_markdown(folder: str, rows: List[Dict]) -> str:
    """The jobs (or runs) of ``folder`` as a Markdown table under a title that says which they are."""
    columns = _columns(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(c)).replace("|", "\\|") for c in columns) + " |")
    failed = sum(r["status"] == "failed" for r in rows)
    what = ("Sweep", "jobs") if is_sweep(folder) else ("Runs in", "runs")
    header = (f"# {what[0]} {os.path.abspath(folder)}\n\n{len(rows)} {what[1]}, {failed} failed; sorted by the "
              "objective, best first.\n\n")
    return header + "\n".join(lines) + "\n"


def write_report(sweep_dir: str, plot: bool = True, rows: Optional[List[Dict]] = None) -> List[Dict]:
    """Write ``summary.csv``, ``summary.md`` and (with matplotlib) ``summary.png`` into ``sweep_dir``."""
    rows = collect(sweep_dir) if rows is None else rows
    columns = _columns(rows)
    with _atomic(os.path.join(sweep_dir, "summary.csv"), newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_fmt(row.get(c)) for c in columns])
    with _atomic(os.path.join(sweep_dir, "summary.md")) as f:
        f.write(summary_markdown(sweep_dir, rows))
    if plot:
        _plot(sweep_dir, rows)
    return rows


@contextlib.contextmanager
def _atomic(path: str, **kwargs):
    """Write ``path`` through a temporary file: jobs of a parallel launcher may rewrite it at once."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", **kwargs) as f:
            yield f
        os.replace(tmp, path)
    # broad: whatever ends the write (Ctrl-C included), the temporary file goes; the error goes on
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _plot(sweep_dir: str, rows: List[Dict]) -> Optional[str]:
    """``summary.png``: the objective against each swept parameter (numbers on a numeric axis, a log
    axis where they span a decade or more), then each job's eval curve; one colour per job in
    every panel, the best job starred, the legend beside the panels."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.info("matplotlib is not installed (pip install '.[sweep]'): no summary.png")
        return None
    done = [r for r in rows if _objective_value(r) is not None]
    params = sorted({p for r in rows for p in r["params"] if len({str(x["params"].get(p)) for x in rows}) > 1})
    objective = done[0]["objective"] if done else "accuracy"
    colours = {r["job"]: plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")(i % 20) for i, r in enumerate(rows)}
    best = _best(done, objective)
    panels = max(1, len(params)) + 1
    legend = min(4.5, 0.5 + 0.045 * max((len(_label(r, params, best)) for r in rows), default=0))  # inches
    fig, axes = plt.subplots(1, panels, figsize=(3.6 * panels + legend, 3.4), squeeze=False)
    for ax, param in zip(axes[0], params or ["job"]):
        _param_panel(ax, param, done, objective, colours, best)
    _curve_panel(axes[0][-1], rows, params, objective, colours, best)
    fig.tight_layout(rect=(0, 0, 1 - legend / fig.get_figwidth(), 1))
    path = os.path.join(sweep_dir, "summary.png")
    tmp = f"{path}.{os.getpid()}.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def _best(done: List[Dict], objective: str) -> Optional[str]:
    """The job with the best objective (the rows come sorted best first)."""
    return done[0]["job"] if done else None


def _param_panel(ax, param: str, done: List[Dict], objective: str, colours: Dict, best: Optional[str]) -> None:
    values = [r["params"].get(param, r["job"]) if param != "job" else r["job"] for r in done]
    numbers = [_number(v) for v in values]
    numeric = bool(values) and all(n is not None for n in numbers)
    if numeric:
        xs = numbers
        if min(xs) > 0 and max(xs) / min(xs) >= 10:
            from matplotlib.ticker import NullFormatter

            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels overlap
    else:
        labels = sorted({str(v) for v in values})
        xs = [labels.index(str(v)) + (i % 3 - 1) * 0.06 for i, v in enumerate(values)]  # side by side, not on top
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels([_short(label, 16) for label in labels], rotation=20, ha="right", fontsize=8)
    for x, r in zip(xs, done):
        star = r["job"] == best
        ax.scatter([x], [r[eval_key(objective)]], color=colours[r["job"]], alpha=0.8, s=120 if star else 40,
                   marker="*" if star else "o", edgecolors="black" if star else "none", zorder=3 if star else 2)
    ax.set_xlabel(param.rsplit(".", 1)[-1])
    ax.set_ylabel(f"eval {objective}")
    ax.grid(alpha=0.3)


def _curve_panel(ax, rows: List[Dict], params: List[str], objective: str, colours: Dict, best: Optional[str]) -> None:
    for r in rows:
        steps, values = _curve(r["job_dir"], objective)
        if steps:
            ax.plot(steps, values, marker=".", color=colours[r["job"]], label=_label(r, params, best),
                    linewidth=2.2 if r["job"] == best else 1.2)
    ax.set_xlabel("global step")
    ax.set_ylabel(f"eval {objective}")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def _label(row: Dict, params: List[str], best: Optional[str]) -> str:
    """A job's legend entry: its swept values by their last key part (the job's name without any)."""
    label = ", ".join(f"{p.rsplit('.', 1)[-1]}={_short(row['params'].get(p), 12)}" for p in params)
    return (label or _short(row["job"], 30)) + (" (best)" if row["job"] == best else "")


def _short(value, width: int) -> str:
    """``value`` for a label: numbers to 3 significant digits, text cut to ``width`` characters."""
    number = _number(value)
    text = f"{number:.3g}" if number is not None and not isinstance(value, bool) else str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _number(value) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _curve(job_dir: str, metric: str):
    steps, values = [], []
    try:
        rows = read_rows(os.path.join(job_dir, "metrics.jsonl"))
    except (OSError, RecordError):  # a damaged log: the report shows no curve for that job
        rows = []
    for row in rows:
        if row.get("kind") == "eval" and isinstance(row.get(metric), (int, float)):
            steps.append(row["step"])
            values.append(row[metric])
    return steps, values


class SweepSummaryCallback(Callback):
    """Rewrites the sweep summary after every job (so a running sweep has one) and when the sweep ends."""

    def on_job_end(self, config, job_return, **kwargs) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.get().mode == RunMode.MULTIRUN and os.path.isdir(str(config.hydra.sweep.dir)):
            try:
                write_report(str(config.hydra.sweep.dir))
            except Exception as e:  # a summary must never fail a job
                log.warning("could not update the sweep summary: %s", e)

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = str(config.hydra.sweep.dir)
        if not os.path.isdir(sweep_dir):
            return
        rows = write_report(sweep_dir)
        failed = [r for r in rows if r["status"] == "failed"]
        log.info("sweep summary: %s (%d jobs, %d failed)", os.path.join(sweep_dir, "summary.md"), len(rows), len(failed))
        for r in failed:
            log.error("job %s failed: %s", r["job"], r["error"])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="train-report", description="Summarise a sweep dir (or a dir of runs) of "
                                                                       "the train command.")
    parser.add_argument("sweep_dir", help="a multirun dir, e.g. outputs/multirun, or a dir of runs, e.g. outputs")
    parser.add_argument("--no-plot", action="store_true", help="skip summary.png")
    parser.add_argument("--write", action="store_true", help="also write summary.csv/.md/.png into a dir of runs "
                                                             "(a sweep dir always gets them)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.sweep_dir):
        print(f"error: {args.sweep_dir}: no such dir; give a sweep dir such as outputs/multirun", file=sys.stderr)
        raise SystemExit(2)
    rows = collect(args.sweep_dir)
    unwritten = None
    if is_sweep(args.sweep_dir) or args.write:
        try:
            write_report(args.sweep_dir, plot=not args.no_plot, rows=rows)
        except OSError as e:
            unwritten = f"{e.filename or args.sweep_dir}: {e.strerror or e}"
    print(summary_markdown(args.sweep_dir, rows))
    if unwritten:
        print(f"error: cannot write the summary into {args.sweep_dir} ({unwritten}); the summary above is all there "
              "is: make the dir writable, or run with a dir you can write", file=sys.stderr)
        raise SystemExit(1)
    if not rows:
        print(f"error: {args.sweep_dir} has no job dirs", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
