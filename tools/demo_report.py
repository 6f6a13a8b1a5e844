"""The summary at the end of `make demo`: a table of the results, and the same figures in results/demo.json.

    .venv/bin/python tools/demo_report.py --run runs/tiny --results results --data data/tiny

Reads what the demo's stages wrote (the trainer's epochs.json, ds2-tune's JSON, ds2-eval's reports) and
writes `results/demo.json` with keys a script can read: `test.wer_lm`, `test.cer_lm`, `test.wer_greedy`,
`test.cer_greedy` (and the same under `dev`), `train.*` (`train.mean_epoch_seconds`), `machine.*` (the CPU and
its matmul peak, `machine.matmul_gflops.float32`), `lm.*`, `rtf.*`, `paths.*`; after `make demo-heldout`
also `heldout.*` and `heldout_dev.*` (the test and dev sentences read by festival voices, an engine the demo
never trains on), and after `make demo-people` `people.*` (recordings of real people, examples/people), with a
breakdown per voice (the table shows festival's), and dev's and test's per synthesizer (the table shows both)
(`test.engines.flite.cer_lm`...).
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepspeech2.fileio import write_json  # noqa: E402


def _load(path: Path) -> dict:
    if not path.is_file():
        sys.exit(f"demo_report: error: `{path}` is missing; run `make demo` to produce it")
    return json.loads(path.read_text(encoding="utf-8"))


def summarize(run: Path, results: Path, data: Path, size: str) -> dict:
    epochs = _load(run / "epochs.json")
    tune = _load(results / "tune.json")
    finished = [e["seconds"] for e in epochs if not e.get("partial")]
    summary = {"demo_size": size, "train": {
        "epochs": len(epochs), "seconds": round(sum(e["seconds"] for e in epochs), 1),
        "mean_epoch_seconds": round(sum(finished) / len(finished), 1) if finished else None,
        "final_train_loss": epochs[-1]["train_loss"],
        "best_dev_wer_greedy": min((e["dev_wer"] for e in epochs if e["dev_wer"] is not None), default=None),
        "best_dev_cer_greedy": min((e["dev_cer"] for e in epochs if e.get("dev_cer") is not None), default=None)},
        # What ds2-tune minimised: WER for English, CER for Mandarin (no word boundaries).
        "lm": {"alpha": tune["best_alpha"], "beta": tune["best_beta"], "metric": tune["metric"],
               "dev_error_at_best": tune["best_error"], "order": 3}}
    for split in ("dev", "test"):
        greedy, lm = _load(results / f"{split}_greedy.json"), _load(results / f"{split}_lm.json")
        summary["language_spaced"] = lm["language_spaced"]  # False: WER counts characters as words (= CER)
        summary[split] = _split_summary(greedy, lm)
        if split == "test":
            summary["rtf"] = {"acoustic": lm["timing"]["rtf_acoustic"], "decoder_lm": lm["timing"]["rtf_decode"],
                              "decoder_greedy": greedy["timing"]["rtf_decode"], "total_lm": lm["timing"]["rtf_total"]}
    # make demo-heldout: festival voices read dev's and test's sentences; make demo-people: recordings of people
    for name in ("heldout_dev", "heldout", "people"):
        if (results / f"{name}_greedy.json").is_file() and (results / f"{name}_lm.json").is_file():
            greedy, lm = _load(results / f"{name}_greedy.json"), _load(results / f"{name}_lm.json")
            summary[name] = _split_summary(greedy, lm) | {"voices": _by_group(greedy, lm, "speaker")}
    serving = results / "serving.json"  # ds2-client's results through ds2-serve (gRPC)
    if serving.is_file():
        sv = _load(serving)
        summary["serving"] = {
            "model_versions": sv["model_versions"], "transcribed": sv["transcribed"], "failed": sv["failed"],
            "median_latency_ms": sv["median_latency_ms"],
            "examples": [{"file": r["file"], "reference": r["reference"], "greedy": r["transcript"],
                          "lm": r["nbest"][0]["text"] if r["nbest"] else None} for r in sv["results"]]}
    summary["paths"] = {"tensorboard": str(run / "tensorboard"), "learning_curve": str(run / "learning_curve.png"),
                        "error_surface": str(results / "tune.png"), "model": str(run / "model"),
                        "test_report": str(results / "test_lm.json"), "data": str(data)}
    return summary


def machine() -> dict:
    """The CPU the demo ran on and its matmul peak now: the demo's times are read against these (2-core machines
    of one kind differ by up to 2x from day to day)."""
    import os

    from deepspeech2_cli._quiet import quiet_tensorflow

    quiet_tensorflow()  # the demo's summary, like its ds2-* stages, shows none of TensorFlow's start-up lines
    from deepspeech2.train.preflight import matmul_peak

    name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), "unknown") if Path("/proc/cpuinfo").is_file() else "unknown"
    return {"cpu": name, "cores": os.cpu_count(),
            "matmul_gflops": {dtype: round(matmul_peak(dtype) / 1e9, 1) for dtype in ("float32", "bfloat16")}}


def _split_summary(greedy: dict, lm: dict) -> dict:
    """One split's figures from its two ds2-eval reports (greedy, and beam search with the LM), and per
    synthesizer where the reports are grouped by `engine` (the tiny corpus' manifests say which)."""
    out = {"utterances": lm["totals"]["scored"], "skipped": lm["totals"]["skipped"],
           "wer_greedy": greedy["totals"]["wer"], "cer_greedy": greedy["totals"]["cer"],
           "wer_lm": lm["totals"]["wer"], "cer_lm": lm["totals"]["cer"]}
    if "engine" in greedy.get("groups", {}) and "engine" in lm.get("groups", {}):
        out["engines"] = _by_group(greedy, lm, "engine")
    return out


def _by_group(greedy: dict, lm: dict, key: str) -> dict:
    """Each group of the reports' `key` breakdown (a voice, an engine) with its greedy and LM figures."""
    return {name: {"utterances": g["utterances"], "wer_greedy": g["wer"], "cer_greedy": g["cer"],
                   "wer_lm": lm["groups"][key][name]["wer"], "cer_lm": lm["groups"][key][name]["cer"]}
            for name, g in greedy["groups"][key].items()}


def format_table(s: dict) -> str:
    # Without word boundaries (Mandarin) WER is CER: the table shows CER only.
    kinds = ("wer", "cer") if s.get("language_spaced", True) else ("cer",)
    head = [f"{k.upper()} greedy" for k in kinds] + [f"{k.upper()} + LM" for k in kinds]
    rows = [f"{'':<18}" + "".join(f"{h:>12}" for h in head)]

    def row(label: str, r: dict) -> str:
        values = [r[f"{k}_greedy"] for k in kinds] + [r[f"{k}_lm"] for k in kinds]
        return f"{label:<18}" + "".join(f"{v:>12.2%}" for v in values)

    for split in ("dev", "test", "heldout_dev", "heldout", "people"):
        if split in s:
            rows.append(row(f"{split} ({s[split]['utterances']})", s[split]))
            if split in ("dev", "test"):  # their voices by synthesizer
                rows += [row(f"  {engine} ({r['utterances']})", r) for engine, r in s[split].get("engines", {}).items()]
            if split == "heldout":  # festival's voices: an engine training never heard
                rows += [row("  " + voice.removeprefix("festival-")[:16], r) for voice, r in s[split]["voices"].items()]
    t = s["train"]
    return "\n".join(rows + [
        "",
        f"training: {t['epochs']} epochs in {t['seconds'] / 60:.1f} min (an epoch: {t['mean_epoch_seconds']:.0f} s); "
        f"LM: 3-gram, alpha {s['lm']['alpha']:.3g} beta {s['lm']['beta']:.3g} (tuned on dev)",
        *_machine_lines(s),
        f"real-time factor on test: acoustic model {s['rtf']['acoustic']:.4f}, beam search + LM "
        f"{s['rtf']['decoder_lm']:.4f}, all {s['rtf']['total_lm']:.4f}",
        *_serving_lines(s),
        f"TensorBoard:    tensorboard --logdir {s['paths']['tensorboard']}",
        f"learning curve: {s['paths']['learning_curve']}",
        f"error surface:  {s['paths']['error_surface']}",
        f"per-utterance:  {s['paths']['test_report']}"])


def _machine_lines(s: dict) -> list[str]:
    if "machine" not in s:
        return []
    m = s["machine"]
    return [f"machine: {m['cpu']}, {m['cores']} cores, matmul peak {m['matmul_gflops']['float32']:.0f} GFLOP/s fp32, "
            f"{m['matmul_gflops']['bfloat16']:.0f} bf16 (2048^2)"]


def _serving_lines(s: dict) -> list[str]:
    if "serving" not in s:
        return []
    sv = s["serving"]
    lines = [f"through gRPC (ds2-serve, model version {', '.join(map(str, sv['model_versions']))}): "
             f"{sv['transcribed']} of {sv['transcribed'] + sv['failed']} test files, median {sv['median_latency_ms']} ms"]
    for e in sv["examples"]:
        lines += [f"  reference: {e['reference']}", f"  greedy:    {e['greedy']}", f"  with LM:   {e['lm']}"]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="the ds2-train workdir")
    ap.add_argument("--results", type=Path, required=True, help="where the tune and eval JSONs are")
    ap.add_argument("--data", type=Path, required=True, help="the demo's data folder")
    ap.add_argument("--size", default="full", help="DEMO_SIZE, recorded in demo.json")
    args = ap.parse_args()
    summary = summarize(args.run, args.results, args.data, args.size)
    summary["machine"] = machine()
    write_json(args.results / "demo.json", summary)
    print(format_table(summary))
    print(f"summary:        {args.results / 'demo.json'}")


if __name__ == "__main__":
    main()
