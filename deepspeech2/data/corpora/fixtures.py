"""Tiny fake corpora in the real on-disk layouts, for tests of the importers (and of `ds2-prepare`).

Each `make_<corpus>(root)` writes a few generated clips (sine + noise, about 0.5 s) in the corpus's own
audio format and transcript files with its own markup, plus one corrupt audio file (garbage bytes) and
one transcript line whose audio is missing. It returns a `Fixture` saying what a correct import yields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

GARBAGE = b"this is not audio \x00\xff\x13\x37" * 64  # what a truncated download or a bad disc copy looks like


@dataclass(frozen=True)
class Expected:
    """One utterance a correct import keeps."""

    text: str  # normalized transcript
    duration: float  # seconds
    speaker: str
    offset: float = 0.0  # seconds into the file (TED-LIUM segments)


@dataclass(frozen=True)
class Fixture:
    corpus_dir: Path  # what to pass to prepare_<corpus>
    expected: dict[str, dict[str, Expected]]  # split -> utterance id -> what the manifest line holds
    skipped: dict[str, list[str]]  # split -> ids or path fragments the report must list as skipped
    converted: bool  # True: audio is converted into output_dir/wav; False: the corpus WAVs are used in place
    sources: dict[str, Path] = field(default_factory=dict)  # utterance id -> original audio file


def tone(frames: int, sample_rate: int, seed: int, channels: int = 1) -> np.ndarray:
    """A deterministic sine-plus-noise clip, float32 (frames,) or (frames, channels), peak < 0.5."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / sample_rate
    wav = 0.3 * np.sin(2 * np.pi * (200 + 50 * seed) * t) + 0.05 * rng.standard_normal(frames)
    wav = wav.astype(np.float32)
    return np.stack([wav, 0.5 * wav], axis=1) if channels == 2 else wav


def _write(path: Path, frames: int, sr: int, seed: int, fmt: str, channels: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), tone(frames, sr, seed, channels), sr, format=fmt, subtype="PCM_16")
    return path


def _garbage(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(GARBAGE)
    return path


def _text(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def make_librispeech(root: Path) -> Fixture:
    """LibriSpeech/{dev-clean,test-clean}/<spk>/<chapter>/*.flac + .trans.txt, 16 kHz FLAC."""
    base = root / "LibriSpeech"
    utts = {  # id: (split, raw transcript, normalized, frames)
        "84-121123-0000": ("dev-clean", "GO DO YOU HEAR", "go do you hear", 8000),
        "84-121123-0001": ("dev-clean", "BUT IN LESS THAN 5 MINUTES THE STAIRCASE GROANED", "but in less than five "
                           "minutes the staircase groaned", 7200),
        "174-50561-0000": ("dev-clean", "FORGOTTEN TOO THE NAME OF GILLIAN THE LOVELY CAPTIVE", "forgotten too the "
                           "name of gillian the lovely captive", 8800),
        "174-50561-0001": ("dev-clean", "CHAPTER 12 OF THE 1984 EDITION", "chapter twelve of the nineteen eighty "
                           "four edition", 6400),
        "1089-134686-0000": ("test-clean", "HE HOPED THERE WOULD BE STEW FOR DINNER", "he hoped there would be "
                             "stew for dinner", 9600),
    }
    expected: dict[str, dict[str, Expected]] = {}
    trans: dict[Path, list[str]] = {}
    sources = {}
    for seed, (utt, (split, raw, norm, frames)) in enumerate(utts.items()):
        spk, chapter, _ = utt.split("-")
        folder = base / split / spk / chapter
        sources[utt] = _write(folder / f"{utt}.flac", frames, 16000, seed, "FLAC")
        trans.setdefault(folder / f"{spk}-{chapter}.trans.txt", []).append(f"{utt} {raw}")
        expected.setdefault(split, {})[utt] = Expected(norm, frames / 16000, spk)
    _garbage(base / "dev-clean/84/121123/84-121123-0002.flac")
    trans[base / "dev-clean/84/121123/84-121123.trans.txt"].append("84-121123-0002 A CORRUPT FILE")
    trans[base / "dev-clean/174/50561/174-50561.trans.txt"].append("174-50561-0002 THIS FLAC WAS NEVER COPIED")
    for path, lines in trans.items():
        _text(path, lines)
    return Fixture(root, expected, {"dev-clean": ["84-121123-0002", "174-50561-0002"]}, True, sources)


def make_voxforge(root: Path) -> Fixture:
    """Two sessions: 48 kHz WAV (wav/) and 16 kHz FLAC (flac/), etc/PROMPTS in each."""
    sessions = {  # session: (folder, ext, sample rate, fmt, {utt: (raw, normalized, frames)})
        "Aaron-20080318-kdl": ("wav", "wav", 48000, "WAV", {
            "b0019": ("THE 2 BOYS WENT HOME", "the two boys went home", 24000),
            "b0020": ("IT'S ALMOST 10 O'CLOCK", "it's almost ten o'clock", 21600)}),
        "anonymous-20080504-qvg": ("flac", "flac", 16000, "FLAC", {
            "a0401": ("ALL THE SAME, HE SAID.", "all the same he said", 8000),
            "a0402": ("SHE ASKED FOR $3", "she asked for three dollars", 7200)}),
    }
    expected: dict[str, Expected] = {}
    sources = {}
    seed = 0
    for session, (folder, ext, sr, fmt, items) in sessions.items():
        speaker = "Aaron" if session.startswith("Aaron") else session
        prompts = []
        for utt, (raw, norm, frames) in items.items():
            sources[f"{session}/{utt}"] = _write(root / session / folder / f"{utt}.{ext}", frames, sr, seed, fmt)
            seed += 1
            prompts.append(f"{session}/mfc/{utt} {raw}")
            expected[f"{session}/{utt}"] = Expected(norm, frames / sr, speaker)
        _text(root / session / "etc" / "PROMPTS", prompts)
    _garbage(root / "Aaron-20080318-kdl/wav/b0021.wav")
    with open(root / "Aaron-20080318-kdl/etc/PROMPTS", "a") as f:
        f.write("Aaron-20080318-kdl/mfc/b0021 A CORRUPT RECORDING\n")
    with open(root / "anonymous-20080504-qvg/etc/PROMPTS", "a") as f:
        f.write("anonymous-20080504-qvg/mfc/a0403 NEVER RECORDED\n")
    return Fixture(root, {"train": expected},
                   {"train": ["Aaron-20080318-kdl/b0021", "anonymous-20080504-qvg/a0403"]}, True, sources)


def make_aishell(root: Path) -> Fixture:
    """data_aishell/wav/{train,dev}/<spk>/*.wav (16 kHz mono, used in place) + the v0.8 transcript."""
    base = root / "data_aishell"
    utts = {  # id: (split, raw, normalized, frames)
        "BAC009S0002W0122": ("train", "而 对 楼市 成交 抑制 作用 最 大 的 限 购", "而对楼市成交抑制作用最大的限购", 8000),
        "BAC009S0002W0123": ("train", "2016 年 的 GDP 增长 了 百分之 6.7", "二千零一十六年的增长了百分之六点七", 7200),
        "BAC009S0003W0121": ("train", "１２ 月 份 的 数据", "十二月份的数据", 8800),
        "BAC009S0003W0122": ("train", "也 成为 地方 政府 的 眼中 钉", "也成为地方政府的眼中钉", 6400),
        "BAC009S0724W0121": ("dev", "广州 市 房地产 中介 协会 分析", "广州市房地产中介协会分析", 9600),
    }
    lines, expected, sources = [], {}, {}
    for seed, (utt, (split, raw, norm, frames)) in enumerate(utts.items()):
        spk = utt[6:11]
        sources[utt] = _write(base / "wav" / split / spk / f"{utt}.wav", frames, 16000, seed, "WAV")
        lines.append(f"{utt} {raw}")
        expected.setdefault(split, {})[utt] = Expected(norm, frames / 16000, spk)
    _garbage(base / "wav/train/S0002/BAC009S0002W0124.wav")
    lines += ["BAC009S0002W0124 损坏 的 文件", "BAC009S0003W0125 没有 录音 的 句子"]
    _text(base / "transcript" / "aishell_transcript_v0.8.txt", sorted(lines))
    return Fixture(root, expected, {"train": ["BAC009S0002W0124", "BAC009S0003W0125"]}, False, sources)


def make_wsj(root: Path) -> Fixture:
    """WSJ0 + WSJ1 disc folders with uncompressed NIST SPHERE .wv1 files and .dot transcripts.

    Speaker 011's .dot sits next to its audio; speaker 012's sits in the transcrp/dots tree of another disc,
    as on the real WSJ0 discs.
    """
    utts = {  # id: (audio folder, raw .dot text, normalized, frames)
        "011c0201": ("11-1.1/wsj0/si_tr_s/011", r"[loud_breath] I\. B\. M\. ,COMMA isn\'t *sp*ecial",
                     "i b m comma isn't special", 8000),
        "011c0202": ("11-1.1/wsj0/si_tr_s/011", "The <Dow> fell 3 %PERCENT .PERIOD [door_slam>] ~",
                     "the dow fell three percent period", 7200),
        "012c0201": ("11-2.1/wsj0/si_tr_s/012", "Prices rose . \"DOUBLE-QUOTE sharply [<door_slam] today",
                     "prices rose double quote sharply today", 8800),
        "012c0202": ("11-2.1/wsj0/si_tr_s/012", "(LEFT-PAREN Analysts --DASH said )RIGHT-PAREN so",
                     "left paren analysts dash said right paren so", 6400),
        "46ac0201": ("13-1.1/wsj1/si_tr_s/46a", "Bonds were mixed [/phone_ring] in light trading",
                     "bonds were mixed in light trading", 9600),
        "440c0201": ("11-14.1/wsj0/si_et_20/440", "Stocks closed higher [phone_ring/]",
                     "stocks closed higher", 8000),
    }
    dots = {"011": root / "11-1.1/wsj0/si_tr_s/011/011c0200.dot",
            "012": root / "11-4.1/wsj0/transcrp/dots/si_tr_s/012/012c0200.dot",
            "46a": root / "13-1.1/wsj1/si_tr_s/46a/46ac0200.dot",
            "440": root / "11-14.1/wsj0/si_et_20/440/440c0200.dot"}
    lines: dict[str, list[str]] = {}
    sources, by_id = {}, {}
    for seed, (utt, (folder, raw, norm, frames)) in enumerate(utts.items()):
        sources[utt] = _write(root / folder / f"{utt}.wv1", frames, 16000, seed, "NIST")
        lines.setdefault(utt[:3], []).append(f"{raw} ({utt})")
        by_id[utt] = Expected(norm, frames / 16000, utt[:3])
    _garbage(root / "11-1.1/wsj0/si_tr_s/011/011c0203.wv1")
    lines["011"].append("A corrupt file (011c0203)")
    lines["012"].append("This one was never recorded (012c0203)")
    for spk, path in dots.items():
        _text(path, lines[spk])
    si84 = {u: e for u, e in by_id.items() if u[:3] in ("011", "012")}
    expected = {"train_si84": si84, "train_si284": {**si84, "46ac0201": by_id["46ac0201"]},
                "test_eval92": {"440c0201": by_id["440c0201"]}}
    bad = ["011c0203", "012c0203"]
    return Fixture(root, expected, {"train_si84": bad, "train_si284": bad}, True, sources)


def make_chime4(root: Path) -> Fixture:
    """CHiME4/data: isolated_1ch_track dt05_*_real (+ et05_bus_simu) WAVs and the annotation JSONs."""
    data = root / "CHiME4" / "data"
    track = data / "audio/16kHz/isolated_1ch_track"
    utts = {  # (split, speaker, wsj_name, env, channel): (dot, normalized, frames)
        ("dt05_real", "F01", "050C0101", "BUS", "CH5"): ("[noise] The index rose 2 points", "the index rose two "
                                                        "points", 8000),
        ("dt05_real", "F01", "050C0102", "CAF", "CH4"): ("Traders were *cau*tious ,COMMA", "traders were cautious "
                                                        "comma", 7200),
        ("dt05_real", "M03", "050C0103", "PED", "CH1"): ("<The> market closed", "the market closed", 8800),
        ("dt05_real", "M03", "050C0104", "STR", "CH5"): ("Volume was heavy", "volume was heavy", 6400),
        ("et05_simu", "F05", "440C0201", "BUS", "CH5"): ("Shares fell sharply", "shares fell sharply", 9600),
    }
    annotations: dict[str, list[dict]] = {}
    expected: dict[str, dict[str, Expected]] = {}
    sources = {}
    for seed, ((split, spk, wsj, env, ch), (dot, norm, frames)) in enumerate(utts.items()):
        set_, kind = split.split("_")
        utt = f"{spk}_{wsj}_{env}"
        sources[utt] = _write(track / f"{set_}_{env.lower()}_{kind}" / f"{utt}.{ch}.wav", frames, 16000, seed, "WAV")
        annotations.setdefault(split, []).append({"speaker": spk, "wsj_name": wsj, "environment": env, "dot": dot,
                                                  "prompt": dot, "ref_mic": ch})
        expected.setdefault(split, {})[utt] = Expected(norm, frames / 16000, spk)
    _garbage(track / "dt05_bus_real/F01_050C0105_BUS.CH5.wav")
    annotations["dt05_real"] += [
        {"speaker": "F01", "wsj_name": "050C0105", "environment": "BUS", "dot": "corrupt", "prompt": "corrupt"},
        {"speaker": "M03", "wsj_name": "050C010A", "environment": "PED", "dot": "missing", "prompt": "missing"}]
    for split, items in annotations.items():
        path = data / "annotations" / f"{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items, indent=1))
    return Fixture(root, expected, {"dt05_real": ["F01_050C0105_BUS", "M03_050C010A_PED"]}, False, sources)


def make_tedlium(root: Path) -> Fixture:
    """TEDLIUM_release-3 with legacy/dev and data/ (train): one 16 kHz .sph per talk, .stm segments."""
    base = root / "TEDLIUM_release-3"
    talks = {  # (split folder, talk): (seconds of audio, [(start, end, raw transcript, normalized)])
        ("legacy/dev", "AlGore_2009"): (2.0, [
            (0.10, 0.60, "so it 's <unk> 100 years later", "so it's one hundred years later"),
            (0.70, 1.20, "we 're {NOISE} going to read(2) it", "we're going to read it")]),
        ("legacy/dev", "BillGates_2010"): (1.5, [
            (0.00, 0.45, "i don 't think so", "i don't think so"),
            (1.00, 2.50, "the end of the talk runs past the audio", "the end of the talk runs past the audio")]),
        ("data", "JaneDoe_2012"): (1.0, [(0.20, 0.80, "hello <unk> world", "hello world")]),
    }
    expected: dict[str, dict[str, Expected]] = {}
    sources = {}
    for seed, ((folder, talk), (seconds, segments)) in enumerate(talks.items()):
        split = "dev" if folder == "legacy/dev" else "train"
        sph = _write(base / folder / "sph" / f"{talk}.sph", int(seconds * 16000), 16000, seed, "NIST")
        stm = [f"{talk} 1 inter_segment_gap 0.00 0.05 <o,,unknown> ignore_time_segment_in_scoring"]
        for start, end, raw, norm in segments:
            utt = f"{talk}-{round(start * 100):07d}-{round(end * 100):07d}"
            stm.append(f"{talk} 1 {talk} {start:.2f} {end:.2f} <o,f0,male> {raw}")
            expected.setdefault(split, {})[utt] = Expected(norm, round(min(end, seconds) - start, 4), talk, start)
            sources[utt] = sph
        _text(base / folder / "stm" / f"{talk}.stm", stm)
    _garbage(base / "legacy/dev/sph/Corrupt_2011.sph")
    _text(base / "legacy/dev/stm/Corrupt_2011.stm", ["Corrupt_2011 1 Corrupt_2011 0.00 0.50 <o,f0,male> broken"])
    _text(base / "legacy/dev/stm/Missing_2012.stm", ["Missing_2012 1 Missing_2012 0.00 0.50 <o,f0,male> gone"])
    return Fixture(root, expected, {"dev": ["Corrupt_2011.sph", "Missing_2012.sph"]}, True, sources)
