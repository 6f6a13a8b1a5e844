"""Benchmark: RHVoice through its library (voicebanks.synthesize) against a process per utterance (RHVoice-test).

    nice -n 10 .venv/bin/python bench/voicebanks.py [--num_utts 60] [--rounds 2] [--workers 1]

The utterances are `make demo`'s: its RHVoice speakers (rate, pitch, vocal tract) reading fortunes sentences in
turn. Each round runs the old way, then the new way, on the same utterances; the first new round includes loading
the five voices. Both ways must give the same samples (checked). Prints, per way and its best round, seconds per
utterance of wall time and of CPU time (this process and its children: steadier than wall time on a busy machine),
times real time, and the saving for `make demo`'s corpus (its RHVoice utterances on its two workers, from the CPU
time: the corpus keeps both cores busy), then one JSON line. The library speaks one utterance at a time, so with
`--workers 2` these all-RHVoice jobs are its worst case; in the corpus one RHVoice job in five has an RHVoice job
next to it, and the other worker meanwhile runs the other engines.
"""

import argparse
import concurrent.futures
import json
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from deepspeech2.audio import audio_info, load_audio, shifted_rate
from deepspeech2_synthetic import voicebanks
from deepspeech2_synthetic.sentences import load_sentences
from deepspeech2_synthetic.sources import Flite, NeuralVoices, VoiceBanks
from deepspeech2_synthetic.tiny import TinyCorpusConfig
from deepspeech2_synthetic.voices import make_speakers

# the corpus the voice banks were measured on (examples/tiny/RESULTS.md#voice-banks): 1200 training speakers, 10%
# flite, 25% neural, 25% voice banks;
# its 6 h hold 793 RHVoice utterances (0.81 h; data/x23/tiny/train.jsonl).
DEMO = dict(train_speakers=1200, voices=(Flite(share=0.1), NeuralVoices(share=0.25), VoiceBanks(share=0.25)))
DEMO_RHVOICE_UTTERANCES = 793
DEMO_WORKERS = 2  # make demo's num_workers, on the machine's two cores


def per_process(voice, text, rate, pitch, formant):
    """The old way: RHVoice-test, one process per utterance, its WAV read back (voicebanks until the library)."""
    with tempfile.TemporaryDirectory(prefix="ds2-rhvoice-") as tmp:
        wav = Path(tmp) / "out.wav"
        cmd = ["RHVoice-test", "-p", voice, "-r", str(voicebanks.rhvoice_percent(rate / formant)),
               "-t", str(voicebanks.rhvoice_percent(pitch / formant)), "-o", str(wav)]
        subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True, timeout=60, check=True)
        return load_audio(wav, sample_rate=None), shifted_rate(audio_info(wav)[0], formant)


def library(voice, text, rate, pitch, formant):
    return voicebanks.synthesize("rhvoice", voice, text, rate, pitch, formant)


def cpu_seconds():
    """CPU time of this process and of its finished children, user and system."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def run(way, jobs, workers):
    """Wall and CPU seconds for `jobs` by `way` on `workers` threads, and the outputs."""
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        out = list(pool.map(lambda job: way(*job), jobs))
    return time.perf_counter() - t0, cpu_seconds() - cpu0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num_utts", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1, help="threads at once, as ds2-prepare tiny's num_workers")
    args = ap.parse_args()
    speakers = [sp for sp in make_speakers(TinyCorpusConfig(out_dir="unused", **DEMO))["train"]
                if sp.engine == "rhvoice"]
    sentences = [s for s in load_sentences("en") if 3 <= len(s.split()) <= 15]
    sentences = [sentences[i] for i in np.random.default_rng(0).permutation(len(sentences))[:args.num_utts]]
    jobs = [(sp.voice, text, sp.rate, sp.pitch, sp.formant) for text, sp in zip(sentences, speakers * args.num_utts)]

    times, cpus = {"process": [], "library": []}, {"process": [], "library": []}
    for r in range(args.rounds):
        for name, way in (("process", per_process), ("library", library)):
            seconds, cpu, out = run(way, jobs, args.workers)
            times[name].append(seconds)
            cpus[name].append(cpu)
            if name == "process":
                reference = out
            elif not all(sr == ref_sr and np.array_equal(wav, ref) for (wav, sr), (ref, ref_sr) in zip(out, reference)):
                raise SystemExit("the library's samples differ from RHVoice-test's")
            print(f"round {r + 1} {name:8s} {seconds:6.2f} s wall, {cpu:6.2f} s CPU")
    audio = sum(len(wav) / sr for wav, sr in reference)
    wall = {name: min(t) / args.num_utts for name, t in times.items()}
    cpu = {name: min(t) / args.num_utts for name, t in cpus.items()}
    demo = {name: DEMO_RHVOICE_UTTERANCES * cpu[name] / DEMO_WORKERS for name in cpu}
    print(f"{args.num_utts} utterances ({audio:.0f} s of speech, {args.workers} worker(s)): the same samples both ways")
    for name in times:
        print(f"  {name:8s} {wall[name] * 1000:6.1f} ms wall and {cpu[name] * 1000:6.1f} ms CPU an utterance, "
              f"{audio / min(times[name]):5.1f}x real time (best of {args.rounds}, the first {times[name][0]:.2f} s)")
    print(f"  make demo's {DEMO_RHVOICE_UTTERANCES} RHVoice utterances on {DEMO_WORKERS} cores: "
          f"{demo['process']:.0f} -> {demo['library']:.0f} s, {demo['process'] - demo['library']:.0f} s saved")
    print(json.dumps([
        {"name": "rhvoice_process_wall_per_utterance", "value": round(wall["process"] * 1000, 1), "unit": "ms"},
        {"name": "rhvoice_library_wall_per_utterance", "value": round(wall["library"] * 1000, 1), "unit": "ms"},
        {"name": "rhvoice_process_cpu_per_utterance", "value": round(cpu["process"] * 1000, 1), "unit": "ms"},
        {"name": "rhvoice_library_cpu_per_utterance", "value": round(cpu["library"] * 1000, 1), "unit": "ms"},
        {"name": "rhvoice_process_speed", "value": round(audio / min(times["process"]), 1), "unit": "x real time"},
        {"name": "rhvoice_library_speed", "value": round(audio / min(times["library"]), 1), "unit": "x real time"},
        {"name": "rhvoice_demo_corpus_saving", "value": round(demo["process"] - demo["library"], 1), "unit": "s"},
    ]))


if __name__ == "__main__":
    main()
