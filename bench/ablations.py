r"""Benchmark: the DS2 paper's design choices, measured small on the tiny corpus (docs/ablations.md).

    .venv/bin/python bench/ablations.py                           # every variant, 2 seeds, 4 minutes each
    .venv/bin/python bench/ablations.py --data data/tiny-small --minutes 0.3 --seeds 1 --only base,noaug \
        --out runs/ablations-small                                # a smoke run of a few minutes
    .venv/bin/python bench/ablations.py --list                    # each variant's one changed flag

A variant is a flagfile in examples/ablations/ that includes another one there (base.flags: the tiny demo's
recipe) and changes one line. Each variant x seed trains with `ds2-train --flagfile=<variant>.flags
--max_train_minutes=<--minutes>` into <--out>/<variant>-s<seed>/ (the data flags point at --data, a folder
in `make demo-data`'s layout). Every run gets the same wall-clock budget, so a cheaper model trains more
epochs: the comparison is at equal compute time, as a user with this machine would see it.

Then each run's last/ bundle (the model when the budget ran out; no epoch picked on dev) is scored on dev
(`deepspeech2.evaluate`, the library behind ds2-eval): WER/CER greedy, and with the beam search and the 3-gram
LM (--lm, default <data>/lm/tiny3.bin from `make demo`) at one fixed alpha/beta for every variant, the demo's
(results/full/tune.json) unless given: not tuned per variant, so the LM columns compare acoustic models
under one decoder. The augmentation comparison is also scored on a noisy copy of dev: dev mixed with
<data>/noise's bank at 0-10 dB SNR (`noisy_copy`).

Reported per run: dev WER/CER, parameters, epochs and steps done, seconds per full epoch, and the training
loss and dev CER curves (TensorBoard's loss every 10 steps and epochs.json's dev CER at each epoch end,
against minutes of training). Prints one markdown table per comparison (each cell `seed 0 / seed 1`),
writes <out>/ablations.png (one row per comparison: dev CER and training loss against minutes),
<out>/ablations.json and <out>/tables.md, then prints one JSON line.

Resumable: a run with results.json is not rerun; one with trained.json is only scored; any other run folder
(an interrupted training) is deleted and trained again from scratch, so that each run has its budget in
one piece.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

REPO = Path(__file__).resolve().parents[1]
FLAGS_DIR = REPO / "examples" / "ablations"
BASE = "base"

# (key, title, variants): one table and one plot row each. DS2's own table numbers.
COMPARISONS = (
    ("batchnorm", "BatchNorm at 1 and 3 recurrent layers (DS2 Table 1)", ("rnn1-nobn", "rnn1", "nobn", BASE)),
    ("sortagrad", "SortaGrad, with and without BatchNorm (DS2 Table 2)",
     ("nobn-nosortagrad", "nobn", "nosortagrad", BASE)),
    ("cells", "Simple clipped-ReLU RNN vs GRU at 5.5 M parameters (DS2 Table 3)", ("simple-rnn", BASE)),
    ("frontend", "Conv front end: 1 or 2 layers, 1-D or 2-D (DS2 Table 4)", ("conv1-1d", "conv2-1d", "conv1-2d", BASE)),
    ("streaming", "Future context: unidirectional, + row conv, bidirectional (DS2 §3.5)",
     ("uni", "uni-rowconv", BASE)),
    ("augmentation", "Augmentation: none vs the tiny recipe's, clean and noisy dev (DS2 §5.2)", ("noaug", BASE)),
)
NOISY = ("noaug", BASE)  # the runs also scored on the noisy dev copy
VARIANTS = tuple(dict.fromkeys(v for _, _, variants in COMPARISONS for v in variants))
DATA_FLAGS = ("train_shards", "dev_shards", "vocab", "mean_std")  # replaced by --data's


# -- the flagfiles ----------------------------------------------------------------------------------------

def flag_lines(path: Path) -> list[str]:
    """The flag lines of a flagfile: comments and blank lines dropped."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def resolve_flags(flagfile: Path) -> dict:
    """ds2-train's flag values after parsing `flagfile` (includes followed) with ds2-train's own flags."""
    from absl import flags

    import deepspeech2_cli.ds2_train  # noqa: F401  (defines ds2-train's flags)

    F = flags.FLAGS
    names = [f.name for f in F.flags_by_module_dict()["deepspeech2_cli.ds2_train"]]
    F.unparse_flags()
    try:
        F(["ds2-train", f"--flagfile={flagfile}", "--workdir=_"])  # --workdir is required, and not a variant's
        return {name: F[name].value for name in names if name != "workdir"}
    finally:
        F.unparse_flags()


def describe(flags_dir: Path = FLAGS_DIR) -> dict:
    """Each flagfile's parent (the flagfile it includes) and the flags it changes from the parent's values."""
    out = {}
    for path in sorted(flags_dir.glob("*.flags")):
        lines = flag_lines(path)
        includes = [line.split("=", 1)[1] for line in lines if line.startswith("--flagfile=")]
        parent = Path(includes[0]).stem if len(includes) == 1 and path.stem != BASE else None
        values = resolve_flags(path)
        model_config(values)  # raises ValueError on overrides that build no model
        changed = {}
        if parent:
            before = resolve_flags(flags_dir / f"{parent}.flags")
            changed = {k: v for k, v in values.items() if before[k] != v}
        out[path.stem] = {"parent": parent, "lines": len(lines), "changed": changed, "flags": values}
    return out


def model_config(values: dict):
    """The ModelConfig a variant's flags build (as ds2-train does; before the vocabulary sizes its output)."""
    from deepspeech2.model_config import load_model_config

    return dataclasses.replace(load_model_config(values["model"]), **json.loads(values["model_overrides"]))


# -- one run ----------------------------------------------------------------------------------------------

def run_state(run_dir: Path, settings: dict) -> str:
    """"done" (results.json), "score" (trained.json) or "train" (nothing, or an interrupted training).

    Raises:
        ValueError: the finished run was made with other settings (--minutes, --data...) than `settings`.
    """
    for name, state in (("results.json", "done"), ("trained.json", "score")):
        path = run_dir / name
        if path.exists():
            made = json.loads(path.read_text(encoding="utf-8"))["settings"]
            if made != settings:
                raise ValueError(f"{path} was made with {made}, not {settings}; give another --out")
            return state
    return "train"


def train_command(variant: str, seed: int, run_dir: Path, args, values: dict) -> list[str]:
    data = Path(args.data)
    cmd = [sys.executable, str(REPO / "bin" / "ds2_train.py"), f"--flagfile={Path(args.flags_dir) / variant}.flags",
           f"--workdir={run_dir}", f"--seed={seed}", f"--max_train_minutes={args.minutes:g}",
           f"--train_shards={data / 'shards' / 'train'}", f"--dev_shards={data / 'shards' / 'dev'}",
           f"--vocab={data / 'vocab.txt'}", f"--mean_std={data / 'mean_std.npz'}"]
    if values["augmentation"]:  # the tiny recipe's, pointed at this data's noise bank (make demo-data)
        cmd.append(f"--augmentation={data / 'augmentation.json'}")
    return cmd + [f"--{x}" for x in args.train_flags]


def train_run(variant, seed, run_dir: Path, args, values, settings) -> bool:
    if run_dir.exists():
        shutil.rmtree(run_dir)  # an interrupted run: start again, so that the budget is in one piece
    run_dir.mkdir(parents=True)
    cmd = train_command(variant, seed, run_dir, args, values)
    print(f"[{variant} s{seed}] training {args.minutes:g} min: log in {run_dir / 'train.log'}", flush=True)
    t0 = time.perf_counter()
    with open(run_dir / "train.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO).returncode
    if rc != 0:
        tail = (run_dir / "train.log").read_text(errors="replace").splitlines()[-15:]
        print(f"[{variant} s{seed}] ds2-train failed (exit {rc}):\n  " + "\n  ".join(tail), flush=True)
        return False
    # The budget is wall-clock: the 15-minute load average at the end says whether other work shared the cores.
    write_json(run_dir / "trained.json", {"settings": settings, "command": cmd,
                                          "wall_seconds": round(time.perf_counter() - t0, 1),
                                          "load_average_15min": round(os.getloadavg()[2], 2)})
    return True


def score_run(variant, seed, run_dir: Path, args, settings, noisy_manifest: Path | None) -> dict:
    from deepspeech2.bundle import load_bundle
    from deepspeech2.decode import DecoderConfig
    from deepspeech2.evaluate import EvalConfig, evaluate

    model_dir = str(run_dir / "last")
    decoders = {"greedy": DecoderConfig(kind="greedy")}
    if args.lm and Path(args.lm).is_file():
        decoders["lm"] = DecoderConfig(kind="beam", beam_size=args.beam_size, alpha=args.alpha, beta=args.beta,
                                       lm_path=args.lm)
    sets = {"dev": Path(args.data) / "dev.clean.jsonl"}
    if noisy_manifest is not None and variant in NOISY:
        sets["noisy_dev"] = noisy_manifest
    scores = {}
    for name, manifest in sets.items():
        for kind, decoder in decoders.items():
            totals = evaluate(EvalConfig(model_dir=model_dir, manifests=(str(manifest),), decoder=decoder,
                                         progress=False))["totals"]
            scores[f"{name}_{kind}"] = {"wer": totals["wer"], "cer": totals["cer"]}
    epochs = json.loads((run_dir / "epochs.json").read_text(encoding="utf-8"))
    # Minutes of training at each epoch end (epochs.json's seconds leave the dev evaluations out).
    ends = [(0, 0.0)]
    for e in epochs:
        ends.append((e["step"], ends[-1][1] + e["seconds"] / 60))
    loss = tensorboard_scalars(run_dir / "tensorboard" / "train", "loss")  # every --log_every_steps steps
    result = {
        "variant": variant, "seed": seed, "settings": settings,
        "params": load_bundle(model_dir).model.count_params(),
        "steps": epochs[-1]["step"] if epochs else 0,
        "epochs": epochs_done(epochs),
        "seconds_per_epoch": seconds_per_epoch(epochs),
        "train_loss": epochs[-1]["train_loss"] if epochs else None,
        "load_average_15min": json.loads((run_dir / "trained.json").read_text()).get("load_average_15min"),
        **scores,
        "cer_curve": [[round(m, 3), e["dev_cer"]] for (_, m), e in zip(ends[1:], epochs)],
        "loss_curve": [[round(_interp(step, ends), 3), round(value, 3)] for step, value in loss],
    }
    write_json(run_dir / "results.json", result)
    return result


def epochs_done(epochs: list[dict]) -> float | None:
    """Full epochs plus the share of the last one the budget cut (None before a first full epoch)."""
    full = [e for e in epochs if not e.get("partial")]
    if not full:
        return None
    cut = epochs[-1]["step"] - full[-1]["step"] if epochs[-1].get("partial") else 0
    return round(len(full) + cut / (full[-1]["step"] / len(full)), 2)


def seconds_per_epoch(epochs: list[dict]) -> float | None:
    """The mean seconds of the full epochs, the first left out when there are others (it holds the
    tf.function tracing); None before a first full epoch."""
    full = [e["seconds"] for e in epochs if not e.get("partial")]
    full = full[1:] if len(full) > 1 else full
    return round(sum(full) / len(full), 1) if full else None


def _interp(step: int, ends: list[tuple[int, float]]) -> float:
    import numpy as np

    return float(np.interp(step, [s for s, _ in ends], [m for _, m in ends]))


def tensorboard_scalars(log_dir: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of scalar `tag` in the event files under `log_dir`, by step."""
    import tensorflow as tf

    points = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == tag:
                    points[event.step] = float(tf.make_ndarray(value.tensor))
    return sorted(points.items())


def write_json(path: Path, obj) -> None:
    from deepspeech2.fileio import write_json as atomic_write_json

    atomic_write_json(path, obj)


# -- the report -------------------------------------------------------------------------------------------

COLUMNS = (  # (header, key, format)
    ("params", "params", lambda v: f"{v / 1e6:.2f} M"),
    ("epochs", "epochs", lambda v: f"{v:g}"),
    ("s/epoch", "seconds_per_epoch", lambda v: f"{v:.0f}"),
    ("train loss", "train_loss", lambda v: f"{v:.1f}"),
    ("dev CER", ("dev_greedy", "cer"), lambda v: f"{100 * v:.1f}"),
    ("dev WER", ("dev_greedy", "wer"), lambda v: f"{100 * v:.1f}"),
    ("dev CER +LM", ("dev_lm", "cer"), lambda v: f"{100 * v:.1f}"),
    ("dev WER +LM", ("dev_lm", "wer"), lambda v: f"{100 * v:.1f}"),
)
NOISY_COLUMNS = (
    ("noisy CER", ("noisy_dev_greedy", "cer"), lambda v: f"{100 * v:.1f}"),
    ("noisy WER", ("noisy_dev_greedy", "wer"), lambda v: f"{100 * v:.1f}"),
    ("noisy WER +LM", ("noisy_dev_lm", "wer"), lambda v: f"{100 * v:.1f}"),
)


def _get(result: dict | None, key):
    if result is None:
        return None
    if isinstance(key, tuple):
        return (result.get(key[0]) or {}).get(key[1])
    return result.get(key)


def tables(results: dict, seeds: list[int]) -> str:
    """One markdown table per comparison; each cell holds every seed's value, `s0 / s1`; — = not run."""
    out = []
    for key, title, variants in COMPARISONS:
        columns = COLUMNS + (NOISY_COLUMNS if key == "augmentation" else ())
        out += [f"**{title}** (seeds {' / '.join(map(str, seeds))}; error rates in %)", "",
                "| variant | " + " | ".join(c[0] for c in columns) + " |",
                "|---" * (len(columns) + 1) + "|"]
        for variant in variants:
            cells = []
            for _, k, fmt in columns:
                values = [_get(results.get((variant, s)), k) for s in seeds]
                if k == "params":  # the same for every seed
                    values = values[:1] if values[0] is not None else values
                cells.append(" / ".join("—" if v is None else fmt(v) for v in values))
            out.append(f"| {variant} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def plot(results: dict, seeds: list[int], png: Path) -> None:
    """One row per comparison: dev CER (greedy) and training loss against minutes, each variant a colour,
    each seed a line style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from deepspeech2.fileio import atomic_path

    styles = ("-", "--", ":", "-.")
    fig, axes = plt.subplots(len(COMPARISONS), 2, figsize=(12, 3.2 * len(COMPARISONS)), dpi=90, squeeze=False)
    for row, (key, title, variants) in enumerate(COMPARISONS):
        cer_ax, loss_ax = axes[row]
        for i, variant in enumerate(variants):
            colour = "black" if variant == BASE else f"C{i}"  # the base looks the same in every row
            for j, seed in enumerate(seeds):
                r = results.get((variant, seed))
                if r is None:
                    continue
                label = f"{variant} s{seed}"
                style = styles[j % len(styles)]
                if r["cer_curve"]:
                    x, y = zip(*r["cer_curve"])
                    cer_ax.plot(x, [100 * v for v in y], style, marker="o", ms=3, color=colour, label=label)
                if key == "augmentation" and r.get("noisy_dev_greedy"):
                    cer_ax.plot([r["cer_curve"][-1][0]], [100 * r["noisy_dev_greedy"]["cer"]], marker="x", ms=9,
                                ls="", color=colour, label=f"{label} noisy dev")
                if r["loss_curve"]:  # per-batch losses swing with the batch's length bucket: smoothed, as
                    x, y = zip(*r["loss_curve"])  # TensorBoard's smoothing does, the raw points faint behind
                    loss_ax.plot(x, y, style, color=colour, lw=0.5, alpha=0.25)
                    loss_ax.plot(x, smooth(y), style, color=colour, lw=1.5, label=label)
        if not loss_ax.lines:
            loss_ax.text(0.5, 0.5, "no loss logged yet (a run logs it every --log_every_steps steps)",
                         ha="center", va="center", fontsize=8, transform=loss_ax.transAxes)
        cer_ax.set_title(title, fontsize=9, loc="left")
        cer_ax.set_ylabel("dev CER (%, greedy)")
        loss_ax.set_ylabel("train loss (CTC; smoothed, raw faint)")
        loss_ax.set_yscale("log")
        for ax in (cer_ax, loss_ax):
            ax.set_xlabel("minutes of training")
            ax.grid(alpha=0.3)
            right = max((max(line.get_xdata()) for line in ax.lines), default=1.0)
            ax.set_xlim(0, 1.05 * right)  # from the start; room for the last points' markers
            if ax.lines:
                ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def report(out: Path, results: dict, seeds: list[int], settings: dict, failed: list[str]) -> str:
    """Writes <out>/tables.md, ablations.png and ablations.json from the runs so far; returns the tables."""
    text = tables(results, seeds)
    (out / "tables.md").write_text(text + "\n", encoding="utf-8")
    plot(results, seeds, out / "ablations.png")
    write_json(out / "ablations.json", {"settings": settings, "seeds": seeds,
                                        "comparisons": [{"key": k, "title": t, "variants": list(v)}
                                                        for k, t, v in COMPARISONS],
                                        "runs": [results[k] for k in sorted(results)], "failed": failed})
    return text


def smooth(values, weight: float = 0.85) -> list[float]:
    """TensorBoard's scalar smoothing: an exponential moving average, debiased for its first points."""
    out, last, norm = [], 0.0, 0.0
    for v in values:
        last, norm = weight * last + (1 - weight) * v, weight * norm + (1 - weight)
        out.append(last / norm)
    return out


def _from_repo(path: str) -> str:
    """`path` (relative to the working directory) relative to the repository root when inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


# -- main -------------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/tiny", help="a folder in `make demo-data`'s layout")
    ap.add_argument("--out", default="runs/ablations", help="run folders, the PNG, the JSON")
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget per run")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per variant")
    ap.add_argument("--only", default="", help="comma-separated variants to run (default: all)")
    ap.add_argument("--flags_dir", default=str(FLAGS_DIR.relative_to(REPO)))
    ap.add_argument("--lm", default=None, help="KenLM model (default <data>/lm/tiny3.bin; missing or \"\": no "
                    "LM columns)")
    ap.add_argument("--tune_json", default="results/full/tune.json", help="default --alpha/--beta: the demo's, "
                    "tuned on dev for its 12-epoch model (ds2-tune); missing: DecoderConfig's 0.5 and 2")
    ap.add_argument("--alpha", type=float, default=None, help="LM weight, the same for every run")
    ap.add_argument("--beta", type=float, default=None, help="word bonus, the same for every run")
    ap.add_argument("--beam_size", type=int, default=50)
    ap.add_argument("--train_flags", nargs="*", default=[], help="more ds2-train flags for every run, e.g. "
                    "verbose=2 (without the leading --; they join the settings a finished run is checked against)")
    ap.add_argument("--list", action="store_true", help="print each variant's parent and changed flag, and exit")
    return ap


def main():
    args = _parser().parse_args()
    for name in ("data", "out", "flags_dir", "lm", "tune_json"):
        if getattr(args, name):
            setattr(args, name, _from_repo(getattr(args, name)))
    os.chdir(REPO)  # flagfiles name paths from the repository root

    if args.list:
        described = describe(Path(args.flags_dir))
        for name, d in described.items():
            print(f"{name:18s} {d['parent'] or '':18s} {json.dumps(d['changed'])}")
        print(json.dumps({name: {k: d[k] for k in ("parent", "lines", "changed")} for name, d in described.items()}))
        return
    args.lm = args.lm if args.lm is not None else str(Path(args.data) / "lm" / "tiny3.bin")
    tuned = json.loads(Path(args.tune_json).read_text()) if Path(args.tune_json).is_file() else {}
    args.alpha = args.alpha if args.alpha is not None else tuned.get("best_alpha", 0.5)
    args.beta = args.beta if args.beta is not None else tuned.get("best_beta", 2.0)
    only = [v for v in args.only.split(",") if v] or list(VARIANTS)
    unknown = sorted(set(only) - set(VARIANTS))
    if unknown:
        sys.exit(f"ablations: error: unknown variants {unknown}; choose from {list(VARIANTS)}")
    missing = [p for p in ("shards/train/index.json", "shards/dev/index.json", "dev.clean.jsonl", "vocab.txt",
                           "mean_std.npz", "augmentation.json", "noise/noise.jsonl")
               if not (Path(args.data) / p).exists()]
    if missing:
        sys.exit(f"ablations: error: `--data`={args.data} lacks {missing}; make it with `make demo-data` "
                 "(DEMO_SIZE=small for data/tiny-small)")
    if not (args.lm and Path(args.lm).is_file()):
        print(f"no LM at {args.lm!r} (`make demo` builds data/tiny/lm/tiny3.bin): greedy figures only", flush=True)
    seeds = list(range(args.seeds))
    out = Path(args.out)
    lm = args.lm if args.lm and Path(args.lm).is_file() else None
    settings = {"minutes": args.minutes, "data": str(args.data), "lm": lm,
                "alpha": args.alpha, "beta": args.beta, "beam_size": args.beam_size, "train_flags": args.train_flags}
    noisy = None
    if any(v in NOISY for v in only):
        from deepspeech2.prepare.noise import noisy_copy

        noisy_dir = out / "noisy_dev"
        noisy = noisy_dir / "dev.clean.jsonl"
        if not noisy.exists():  # deterministic: the same copy for every run
            noisy_copy(Path(args.data) / "dev.clean.jsonl", Path(args.data) / "noise" / "noise.jsonl", noisy_dir)

    results, failed = {}, []
    for variant in VARIANTS:  # finished earlier, here or with other --only: all in the tables
        for seed in seeds:
            run_dir = out / f"{variant}-s{seed}"
            if run_state(run_dir, settings) == "done":
                results[(variant, seed)] = json.loads((run_dir / "results.json").read_text())
    t0 = time.perf_counter()
    # Seed-major: every variant's seed 0 first, so that a table stopped half way is a whole one-seed table.
    for seed in seeds:
        for variant in [v for v in VARIANTS if v in only]:
            run_dir = out / f"{variant}-s{seed}"
            state = run_state(run_dir, settings)
            if state == "done":
                print(f"[{variant} s{seed}] finished earlier: {run_dir / 'results.json'}", flush=True)
                continue
            values = resolve_flags(Path(args.flags_dir) / f"{variant}.flags")
            if state == "train" and not train_run(variant, seed, run_dir, args, values, settings):
                failed.append(f"{variant}-s{seed}")
                continue
            results[(variant, seed)] = r = score_run(variant, seed, run_dir, args, settings, noisy)
            print(f"[{variant} s{seed}] {r['steps']} steps, dev CER {100 * r['dev_greedy']['cer']:.1f}% "
                  f"WER {100 * r['dev_greedy']['wer']:.1f}% (greedy)", flush=True)
            report(out, results, seeds, settings, failed)  # after each run: the tables so far
    text = report(out, results, seeds, settings, failed)
    print("\n" + text)
    print(f"wrote {out / 'tables.md'}, {out / 'ablations.png'}, {out / 'ablations.json'}")
    print(json.dumps({"bench": "ablations", "minutes": args.minutes, "data": str(args.data), "seeds": seeds,
                      "runs": len(results), "failed": failed, "wall_minutes": round((time.perf_counter() - t0) / 60, 1),
                      "dev_cer_greedy": {v: [round(results[(v, s)]["dev_greedy"]["cer"], 4)
                                             if (v, s) in results else None for s in seeds] for v in VARIANTS},
                      "png": str(out / "ablations.png"), "json": str(out / "ablations.json")}))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:  # a finished run made with other settings, a flagfile that builds no model
        sys.exit(f"ablations: error: {e}")
