"""The LibriSpeech recipe's results table: WER and CER per evaluation split, greedy and with the LM, from the ds2-eval
reports run.sh wrote (RUN/eval/<split>_{greedy,lm}.json) and the alpha/beta ds2-tune chose (RUN/tune.json).

    .venv/bin/python examples/librispeech/results.py --run runs/librispeech --lm data/librispeech/lm/4-gram.bin

Writes RUN/results.md (the table, printed too) and RUN/results.json (the same figures, fractions, for scripts:
`splits.<split>.{greedy,lm}.{wer,cer}`), each only when its contents change, so a re-run of a finished recipe leaves
them as they were. A split without reports (not in the corpus) is listed as missing.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from deepspeech2.fileio import atomic_write  # noqa: E402

SPLITS = ("dev-clean", "dev-other", "test-clean", "test-other")
KINDS = ("greedy", "lm")


def summarize(run: Path, lm: str, splits=SPLITS) -> dict:
    tune = json.loads((run / "tune.json").read_text(encoding="utf-8"))
    summary = {"model_dir": str(run / "model"),
               "lm": {"path": lm, "alpha": tune["best_alpha"], "beta": tune["best_beta"], "tuned_on": "dev-clean",
                      "dev_clean_wer_at_best": tune["best_error"]},
               "splits": {}, "missing": []}
    for split in splits:
        paths = {kind: run / "eval" / f"{split}_{kind}.json" for kind in KINDS}
        if not all(p.is_file() for p in paths.values()):
            summary["missing"].append(split)
            continue
        reports = {kind: json.loads(p.read_text(encoding="utf-8")) for kind, p in paths.items()}
        totals = {kind: r["totals"] for kind, r in reports.items()}
        summary["splits"][split] = {
            "utterances": totals["greedy"]["scored"], "skipped": totals["greedy"]["skipped"],
            "speakers": len(reports["greedy"]["groups"].get("speaker", {})),
            **{kind: {"wer": t["wer"], "cer": t["cer"]} for kind, t in totals.items()},
            "beam_size": reports["lm"]["decoder"]["beam_size"],
            "reports": {kind: str(p) for kind, p in paths.items()}}
    return summary


def markdown(summary: dict) -> str:
    lm = summary["lm"]
    lines = ["| split | utterances | WER greedy | WER LM | CER greedy | CER LM |",
             "|---|---:|---:|---:|---:|---:|"]
    for split, s in summary["splits"].items():
        lines.append(f"| {split} | {s['utterances']} | {100 * s['greedy']['wer']:.2f}% | {100 * s['lm']['wer']:.2f}% "
                     f"| {100 * s['greedy']['cer']:.2f}% | {100 * s['lm']['cer']:.2f}% |")
    for split in summary["missing"]:
        lines.append(f"| {split} | not in the corpus | | | | |")
    beams = sorted({s["beam_size"] for s in summary["splits"].values()})
    lines += ["", f"LM: {lm['path']}, alpha {lm['alpha']:g}, beta {lm['beta']:g} (tuned on dev-clean), beam "
              f"{', '.join(map(str, beams))}. Model: {summary['model_dir']}."]
    return "\n".join(lines) + "\n"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        with atomic_write(path) as f:
            f.write(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="the recipe's RUN folder (model/, tune.json, eval/)")
    ap.add_argument("--lm", required=True, help="the LM the reports were decoded with")
    args = ap.parse_args()
    run = Path(args.run)
    for need in (run / "tune.json",):
        if not need.is_file():
            sys.exit(f"results: error: `{need}` is missing; run examples/librispeech/run.sh to make it")
    summary = summarize(run, args.lm)
    table = markdown(summary)
    _write_if_changed(run / "results.md", table)
    _write_if_changed(run / "results.json", json.dumps(summary, indent=2) + "\n")
    print(table + f"\nwrote {run / 'results.md'} and {run / 'results.json'}")


if __name__ == "__main__":
    main()
