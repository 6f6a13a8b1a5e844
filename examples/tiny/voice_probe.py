r"""Which part of a flite voice the model fails on: its pitch, its vocal tract, or the speaker herself.

    .venv/bin/python examples/tiny/voice_probe.py --manifest data/tiny/dev.clean.jsonl --model_dir runs/tiny/model

Reads the first --num_sentences sentences of --manifest with flite voices under the tiny corpus' own
transforms (`synthesis.synthesize`: formants k times higher, F0 set apart), writes one manifest per setting
under --out, and scores each with the model, greedy: the test voice `slt` as it is, with a man's pitch,
with a man's formants and with both; the training voices `awb` and `kal16` as they are and made women.
Give it dev sentences: the voices are what is probed, and test sentences are for reporting only.
Prints a table and one JSON line (CER per setting). examples/tiny/RESULTS.md, "Is `slt` a woman's vocal tract?".
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

# (flite voice, its mean F0 in Hz, formant factor k, pitch factor): the F0 comes out as F0 * pitch.
SETTINGS = (("slt", 170.0, 1.0, 1.0), ("slt", 170.0, 1.0, 0.62), ("slt", 170.0, 0.85, 1.0),
            ("slt", 170.0, 0.85, 0.62), ("awb", 110.0, 1.0, 1.0), ("awb", 110.0, 1.2, 1.6),
            ("kal16", 105.0, 1.0, 1.0), ("kal16", 105.0, 1.2, 1.6))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True, help="sentences to read (a dev manifest)")
    ap.add_argument("--model_dir", required=True, help="the trained model bundle (runs/tiny/model)")
    ap.add_argument("--out", default="results/voice_probe", help="wav files and one manifest per setting")
    ap.add_argument("--num_sentences", type=int, default=40)
    args = ap.parse_args(argv)

    from deepspeech2.data.manifest import Utterance, read_manifest, write_manifest
    from deepspeech2.evaluate import EvalConfig, evaluate
    from deepspeech2_synthetic import sentences, synthesis, voices

    flite = shutil.which("flite")
    if flite is None:
        sys.exit(f"voice_probe: flite not found; {sentences.APT_HINT}")
    utts = read_manifest(args.manifest)[:args.num_sentences]
    if not utts:
        sys.exit(f"voice_probe: {args.manifest} has no utterances")
    out = Path(args.out)
    manifests = []
    for voice, f0, k, pitch in SETTINGS:
        name = f"{voice}-k{k}-f0{round(f0 * pitch)}"
        sp = voices.Speaker(id=name, engine="flite", voice=voice, variant=None, gender="F", rate=1.0, pitch=pitch,
                          f0=f0, formant=k)
        rows = []
        for i, u in enumerate(utts):
            job = synthesis.make_job("dev", i, u.text, sp, seed=7)
            duration, _ = synthesis.render(job, out, synthesis.Synthesizers("espeak-ng", flite))
            rows.append(Utterance(audio_filepath=str(job.path(out).resolve()), duration=round(duration, 4),
                                  text=u.text, speaker=name))
        manifests.append(str(out / f"{name}.jsonl"))
        write_manifest(manifests[-1], rows)
    report = evaluate(EvalConfig(model_dir=args.model_dir, manifests=tuple(manifests), group_by=("speaker",)))
    cer = {}
    for voice, f0, k, pitch in SETTINGS:
        name = f"{voice}-k{k}-f0{round(f0 * pitch)}"
        cer[name] = round(100 * report["groups"]["speaker"][name]["cer"], 2)
        print(f"{name:18s} formants x{k:<5} F0 {round(f0 * pitch):4d} Hz   CER greedy {cer[name]:6.2f}%")
    print(json.dumps({"cer": cer, "num_sentences": len(utts)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
