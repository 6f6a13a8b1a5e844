r"""A recipe's results as one Markdown table, from its `ds2-eval --report` files.

    .venv/bin/python examples/results_table.py runs/wsj/test_dev93_greedy.json runs/wsj/test_dev93_lm.json \
        --out runs/wsj/results.md
    .venv/bin/python examples/results_table.py runs/chime4/et05_real_lm.json --group_by environment

A report is a row, named by its file, `<set>_<decoding>.json` (`test_eval92_lm.json`: set test_eval92, decoded
with the LM), with how it was decoded (greedy, or the beam, LM, alpha and beta) and the utterances scored. The
columns are WER and CER; with --group_by, the report's headline metric (WER, or CER for Mandarin) per group
(`ds2-eval --group_by` must have grouped by that key) and overall. Prints the table; --out also writes it, only
when it changed (so a finished recipe run again leaves the file alone).
"""

import argparse
import json
import sys
from pathlib import Path

from deepspeech2.fileio import atomic_write


def decoding(report: dict) -> str:
    """How a report's hypotheses were decoded: "greedy", or "beam 500, words4.bin α 0.8 β 1.5"."""
    d = report["decoder"]
    if d["kind"] == "greedy":
        return "greedy"
    lm = f", {Path(d['lm_path']).name} α {d['alpha']:g} β {d['beta']:g}" if d.get("lm_path") else ", no LM"
    return f"beam {d['beam_size']}{lm}"


def table(reports: dict[str, dict], group_by: str | None = None) -> str:
    """`reports` ({row name: ds2-eval report}) as a Markdown table, in the order given.

    Raises:
        ValueError: a report was not grouped by `group_by`.
    """
    if group_by is None:
        header = ["set", "decoding", "utterances", "WER", "CER"]
        rows = [[name.rsplit("_", 1)[0], decoding(r), str(r["totals"]["scored"]), f"{r['totals']['wer']:.2%}",
                 f"{r['totals']['cer']:.2%}"] for name, r in reports.items()]
    else:
        missing = [name for name, r in reports.items() if group_by not in r["groups"]]
        if missing:
            raise ValueError(f"reports {missing} are not grouped by {group_by!r}: run ds2-eval with --group_by {group_by}")
        groups = sorted({g for r in reports.values() for g in r["groups"][group_by]})
        metric = next(iter(reports.values()))["headline_metric"] if reports else "wer"
        header = ["set", "decoding", *(g.upper() for g in groups), f"all ({metric.upper()})"]
        rows = [[name.rsplit("_", 1)[0], decoding(r),
                 *(f"{r['groups'][group_by][g][metric]:.2%}" if g in r["groups"][group_by] else "-" for g in groups),
                 f"{r['totals'][metric]:.2%}"] for name, r in reports.items()]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="ds2-eval --report files, <set>_<decoding>.json")
    parser.add_argument("--group_by", help="a key the reports are grouped by (environment, speaker, ...)")
    parser.add_argument("--out", type=Path, help="also write the table here (when it changed)")
    args = parser.parse_args()
    try:
        reports = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in args.reports}
        text = table(reports, args.group_by)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"results_table.py: error: {e}")
    sys.stdout.write(text)
    if args.out and not (args.out.is_file() and args.out.read_text(encoding="utf-8") == text):
        with atomic_write(args.out) as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
