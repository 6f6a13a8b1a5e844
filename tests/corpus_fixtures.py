"""Tiny fake corpora in the real on-disk layouts, for tests of the importers (and of `ds2-prepare`).

Each `make_<corpus>(root)` writes a few generated clips (sine + noise, about 0.5 s) in the corpus's own
audio format and transcript files with its own markup, plus one corrupt audio file (garbage bytes) and
one transcript line whose audio is missing. It returns a `Fixture` saying what a correct import yields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

GARBAGE = b"this is not audio \x00\xff\x13\x37" * 64  # what a truncated download or a bad disc copy looks like
CORRUPT = "could not be read"  # report reasons (fragments) for the corrupt file and the missing one
MISSING = "is missing"


@dataclass(frozen=True)
class Expected:
    """One utterance a correct import keeps."""

    text: str  # normalized transcript
    duration: float  # seconds
    speaker: str
    offset: float = 0.0  # seconds into the file (TED-LIUM segments)
    extra: Mapping[str, str] = field(default_factory=dict, compare=False)  # other keys the line must carry


@dataclass(frozen=True)
class Fixture:
    corpus_dir: Path  # what to pass to prepare_<corpus>
    expected: dict[str, dict[str, Expected]]  # split -> utterance id -> what the manifest line holds
    skipped: dict[str, dict[str, str]]  # split -> {id or path fragment: reason fragment} the report must list
    converted: bool  # True: audio is converted into output_dir/wav; False: the corpus' files are used in place
    sources: dict[str, Path] = field(default_factory=dict)  # utterance id -> original audio file
    excluded: dict[str, int] = field(default_factory=dict)  # split -> items left out by the split's definition
    prepare_kwargs: dict = field(default_factory=dict)  # extra keyword arguments for prepare_<corpus>
    in_place: frozenset[str] = frozenset()  # with `converted`: utterance ids whose audio is used in place all the same


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
    """LibriSpeech/{dev-clean,test-clean}/<spk>/<chapter>/*.flac + .trans.txt, 16 kHz FLAC (used in place)."""
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
    return Fixture(root, expected, {"dev-clean": {"84-121123-0002": CORRUPT, "174-50561-0002": MISSING}}, False,
                   sources)


def make_voxforge(root: Path) -> Fixture:
    """Sessions as VoxForge names them: 48 kHz WAV (wav/, converted) and 16 kHz FLAC (flac/, used in place),
    etc/PROMPTS in each.

    Not every session folder is `<user>-<8 digits>-<suffix>`: `Aaron-20080320` has no suffix and
    `Kevin-2009041514a-xyz_2` has a 10-digit stamp with a letter and a `_2` tail. Kaldi's pattern
    `<user>-[0-9]{8,10}[a-z]*([_-].*)?` gives both their user as the speaker.
    """
    sessions = {  # session: (folder, ext, sample rate, fmt, speaker, {utt: (raw, normalized, frames)})
        "Aaron-20080318-kdl": ("wav", "wav", 48000, "WAV", "Aaron", {
            "b0019": ("THE 2 BOYS WENT HOME", "the two boys went home", 24000),
            "b0020": ("IT'S ALMOST 10 O'CLOCK", "it's almost ten o'clock", 21600)}),
        "Aaron-20080320": ("wav", "wav", 44100, "WAV", "Aaron", {
            "a0010": ("GOOD MORNING", "good morning", 17640)}),
        "Kevin-2009041514a-xyz_2": ("flac", "flac", 16000, "FLAC", "Kevin", {
            "rb-01": ("RED BOOKS", "red books", 5600)}),
        "anonymous-20080504-qvg": ("flac", "flac", 16000, "FLAC", "anonymous-20080504-qvg", {
            "a0401": ("ALL THE SAME, HE SAID.", "all the same he said", 8000),
            "a0402": ("SHE ASKED FOR $3", "she asked for three dollars", 7200)}),
    }
    expected: dict[str, Expected] = {}
    sources = {}
    seed = 0
    for session, (folder, ext, sr, fmt, speaker, items) in sessions.items():
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
                   {"train": {"Aaron-20080318-kdl/b0021": CORRUPT, "anonymous-20080504-qvg/a0403": MISSING}}, True,
                   sources, in_place=frozenset(u for u in expected if u.startswith(("Kevin", "anonymous"))))


def make_aishell(root: Path) -> Fixture:
    """data_aishell/wav/{train,dev}/<spk>/*.wav (16 kHz mono, used in place) + the v0.8 transcript.

    Real transcripts spell a few Latin letters full-width ("ａ股": A-shares); they are spoken, so they stay
    (upper-cased, as lhotse's recipe does), next to the characters.
    """
    base = root / "data_aishell"
    utts = {  # id: (split, raw, normalized, frames)
        "BAC009S0002W0122": ("train", "而 对 楼市 成交 抑制 作用 最 大 的 限 购", "而对楼市成交抑制作用最大的限购", 8000),
        "BAC009S0002W0123": ("train", "今年 的 GDP 增长 了 百分之 六", "今年的GDP增长了百分之六", 7200),
        "BAC009S0003W0121": ("train", "１２ 月 份 的 数据", "十二月份的数据", 8800),
        "BAC009S0003W0122": ("train", "也 成为 地方 政府 的 眼中 钉", "也成为地方政府的眼中钉", 6400),
        "BAC009S0003W0123": ("train", "ａ股 市场 的 ｋ 线", "A股市场的K线", 5600),
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
    return Fixture(root, expected, {"train": {"BAC009S0002W0124": CORRUPT, "BAC009S0003W0125": MISSING}}, False,
                   sources)


# The WSJ index files (`<disc>/wsj?/doc/indices/...`) that define the Kaldi splits, as on the LDC discs:
# `;` comment lines, then `<disc id>:<path on that disc>`; the Nov'92 test indices omit the extension.
_NDX_HEADER = [";; File: {name}, updated 04/26/94", ";;", ";; Index for the fixture", ";;"]


# WSJ1's LM training text (13-32.1/wsj1/doc/lng_modl/lm_train/np_data/<year>/*.z): `<...>` markup lines around
# sentences. {file below np_data: [(line, what prepare_wsj_lm_text writes for it, None: dropped)]}
WSJ_LM_TEXT = {
    "87/w7_001.z": [("<art.870102-0001>", None), ("<s>", None), ("the dow jones average rose three points", "the dow "
                    "jones average rose three points"), ("</s>", None), ("<s>", None),
                    ("Mr. Smith said prices fell", "mister smith said prices fell"), ("</s>", None)],
    "88/w8_001.z": [("<art.880301-0002>", None), ("bond prices were mixed in light trading", "bond prices were mixed "
                    "in light trading"), ("the score was 3-2", None)],
    "89/w9_001.z": [("<art.890515-0003>", None), ("analysts said the index would fall", "analysts said the index would "
                    "fall")],
}


def unix_compress(data: bytes) -> bytes:
    """`data` as the `compress` command writes it (.Z: LZW, little-endian bit packing, block mode), for inputs
    short enough that every code fits in 9 bits, the width gzip starts with (so no width change to get wrong)."""
    table = {bytes([i]): i for i in range(256)}
    codes, word = [], b""
    for byte in data:
        longer = word + bytes([byte])
        if longer in table:
            word = longer
            continue
        codes.append(table[word])
        table[longer] = len(table) + 1  # code 256 is block mode's CLEAR
        word = bytes([byte])
    codes += [table[word]] if word else []
    assert len(codes) < 256, f"{len(data)} bytes need codes wider than 9 bits: keep the text shorter"
    out, bits, count = bytearray(b"\x1f\x9d\x90"), 0, 0  # magic, then block mode | 16 bits at most
    for code in codes:
        bits |= code << count
        count += 9
        while count >= 8:
            out.append(bits & 0xFF)
            bits, count = bits >> 8, count - 8
    return bytes(out + (bytes([bits]) if count else b""))


def make_wsj(root: Path, min_seconds: float = 0.0) -> Fixture:
    """WSJ0 + WSJ1 disc folders: uncompressed NIST SPHERE .wv1, .dot transcripts, and the .ndx index files.

    The splits come from the index files, not the folders: `si_dt_05` holds an utterance (4k0c0402) that is
    not in `h2_p0.ndx`, so it is in no split; speaker 401 is in `tr_s_wv1.ndx` but left out of SI-84/SI-284
    (Kaldi's wsj_data_prep.sh). Disc 13-16.1 is upper-cased, as some copies are. Speaker 012's .dot sits in the
    transcrp/dots tree of another disc, as on the real WSJ0 discs. Disc 13-32.1 holds the LM training text
    (`WSJ_LM_TEXT`), `compress`ed. Clips are at least `min_seconds` long (a recipe's model needs audio long enough
    for the text's CTC labels).
    """
    utts = {  # id: (audio file, raw .dot text, normalized, frames)
        "011c0201": ("11-1.1/wsj0/si_tr_s/011/011c0201.wv1",
                     r"[loud_breath] Mr\. Ortiz said I\. B\. M\. ,COMMA isn\'t *sp*ecial",
                     "mister ortiz said i b m comma isn't special", 8000),
        "011c0202": ("11-1.1/wsj0/si_tr_s/011/011c0202.wv1", "The <Dow> fell 3 %PERCENT .PERIOD [door_slam>] ~",
                     "the dow fell three percent period", 7200),
        "012c0201": ("11-2.1/wsj0/si_tr_s/012/012c0201.wv1",
                     "Prices rose . \"DOUBLE-QUOTE sharply [<door_slam] today",
                     "prices rose double quote sharply today", 8800),
        "012c0202": ("11-2.1/wsj0/si_tr_s/012/012c0202.wv1", "(LEFT-PAREN Analysts --DASH said )RIGHT-PAREN so",
                     "left paren analysts dash said right paren so", 6400),
        "401c0201": ("11-2.1/wsj0/si_tr_s/401/401c0201.wv1", "Speaker four oh one", "speaker four oh one", 4800),
        "46ac0201": ("13-1.1/wsj1/si_tr_s/46a/46ac0201.wv1", "Bonds were mixed [/phone_ring] in June trading",
                     "bonds were mixed in june trading", 9600),
        "440c0201": ("11-14.1/wsj0/si_et_20/440/440c0201.wv1", "Stocks closed higher [phone_ring/]",
                     "stocks closed higher", 8000),
        "4k0c0301": ("13-16.1/WSJ1/SI_DT_20/4K0/4K0C0301.WV1",
                     "MRS\\. JONES SAID SO: ,COMMA DR\\. SMITH AGREED",
                     "missus jones said so comma doctor smith agreed", 7200),
        "4k0c0401": ("13-16.1/WSJ1/SI_DT_05/4K0/4K0C0401.WV1", "SALES ROSE", "sales rose", 5600),
        "4k0c0402": ("13-16.1/WSJ1/SI_DT_05/4K0/4K0C0402.WV1", "NOT IN THE INDEX", "not in the index", 5600),
    }
    dots = {"011": root / "11-1.1/wsj0/si_tr_s/011/011c0200.dot",
            "012": root / "11-4.1/wsj0/transcrp/dots/si_tr_s/012/012c0200.dot",
            "401": root / "11-2.1/wsj0/si_tr_s/401/401c0200.dot",
            "46a": root / "13-1.1/wsj1/si_tr_s/46a/46ac0200.dot",
            "440": root / "11-14.1/wsj0/si_et_20/440/440c0200.dot",
            "4k03": root / "13-16.1/WSJ1/SI_DT_20/4K0/4K0C0300.DOT",
            "4k04": root / "13-16.1/WSJ1/SI_DT_05/4K0/4K0C0400.DOT"}
    lines: dict[Path, list[str]] = {}
    sources, by_id = {}, {}
    for seed, (utt, (path, raw, norm, frames)) in enumerate(utts.items()):
        frames = max(frames, round(min_seconds * 16000))
        sources[utt] = _write(root / path, frames, 16000, seed, "NIST")
        dot = dots.get(utt[:3]) or dots[utt[:3] + utt[5]]
        upper = dot.name.isupper()
        lines.setdefault(dot, []).append(f"{raw} ({utt.upper() if upper else utt})")
        by_id[utt] = Expected(norm, frames / 16000, utt[:3])
    _garbage(root / "11-1.1/wsj0/si_tr_s/011/011c0203.wv1")
    lines[dots["011"]].append("A corrupt file (011c0203)")
    lines[dots["012"]].append("This one was never recorded (012c0203)")
    for path, dot_lines in lines.items():
        _text(path, dot_lines)

    def ndx(path: str, entries: list[str]) -> None:
        _text(root / path, [h.format(name=Path(path).name) for h in _NDX_HEADER] + entries)

    ndx("11-13.1/wsj0/doc/indices/train/tr_s_wv1.ndx",
        [f"11_1_1:wsj0/si_tr_s/011/011c020{i}.wv1" for i in (1, 2, 3)]
        + [f"11_2_1:wsj0/si_tr_s/012/012c020{i}.wv1" for i in (1, 2, 3)]
        + ["11_2_1:wsj0/si_tr_s/401/401c0201.wv1"])
    ndx("13-34.1/wsj1/doc/indices/si_tr_s.ndx", ["13_1_1:wsj1/si_tr_s/46a/46ac0201.wv1"])
    ndx("11-13.1/wsj0/doc/indices/test/nvp/si_et_20.ndx", ["11_14_1:wsj0/si_et_20/440/440c0201"])
    ndx("13-34.1/wsj1/doc/indices/h1_p0.ndx", ["13_16_1:wsj1/si_dt_20/4k0/4k0c0301.wv1"])
    ndx("13-34.1/wsj1/doc/indices/h2_p0.ndx", ["13_16_1:wsj1/si_dt_05/4k0/4k0c0401.wv1"])
    for name, lines in WSJ_LM_TEXT.items():
        path = root / "13-32.1/wsj1/doc/lng_modl/lm_train/np_data" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(unix_compress("".join(line + "\n" for line, _ in lines).encode("ascii")))

    si84 = {u: by_id[u] for u in ("011c0201", "011c0202", "012c0201", "012c0202")}
    expected = {"train_si84": si84, "train_si284": {**si84, "46ac0201": by_id["46ac0201"]},
                "test_eval92": {"440c0201": by_id["440c0201"]}, "test_dev93": {"4k0c0301": by_id["4k0c0301"]},
                "test_dev93_5k": {"4k0c0401": by_id["4k0c0401"]}}
    bad = {"011c0203": CORRUPT, "012c0203": MISSING}
    return Fixture(root, expected, {"train_si84": bad, "train_si284": bad}, True, sources,
                   excluded={"train_si84": 1, "train_si284": 1})


def make_chime4(root: Path, wsj0: bool = True, min_seconds: float = 0.0) -> Fixture:
    """CHiME-4 as its archive unpacks, `CHiME3/data/...`:

        audio/16kHz/isolated_1ch_track/{dt05,et05}_<env>_{real,simu}/<SPK>_<WSJ>_<ENV>.wav   (one file each)
        audio/16kHz/isolated_6ch_track/tr05_<env>_{real,simu}/<SPK>_<WSJ>_<ENV>.CH<n>.wav    (training)
        annotations/<set>_<kind>.json, annotations/<set>_<kind>_1ch_track.list (channel used per utterance)
        transcriptions/<set>_<kind>.dot_all                                             ("text (<SPK>_<WSJ>_<ENV>)")

    Real sets carry their transcript in the annotation's `dot`; et05_simu's annotation has none (its text
    is in `transcriptions/et05_simu.dot_all`) and no 1ch_track list (that came in a later CHiME-4 update);
    tr05_simu is WSJ0 audio with noise added, its text is in the WSJ0 .dot files (`wsj0_dir`). dt05_simu's
    text is in its `.dot_all` too. The et05 sets have a speaker in each of the four environments. Clips are at
    least `min_seconds` long (for a recipe's model: audio long enough for the text's CTC labels).
    """
    data = root / "CHiME3" / "data"
    one = data / "audio/16kHz/isolated_1ch_track"
    six = data / "audio/16kHz/isolated_6ch_track"
    utts = {  # (split, speaker, wsj_name, env, channel): (dot in the annotation, normalized, frames)
        ("dt05_real", "F01", "050C0101", "BUS", "CH5"): ("[noise] The index rose 2 points", "the index rose two "
                                                        "points", 8000),
        ("dt05_real", "F01", "050C0102", "CAF", "CH4"): ("Traders were *cau*tious ,COMMA", "traders were cautious "
                                                        "comma", 7200),
        ("dt05_real", "M03", "050C0103", "PED", "CH1"): ("<The> market closed", "the market closed", 8800),
        ("dt05_real", "M03", "050C0104", "STR", "CH5"): ("Mr\\. Volcker was heavy", "mister volcker was heavy",
                                                        6400),
        ("dt05_simu", "M03", "050C0103", "PED", "CH5"): (None, "the market closed", 8800),
        ("et05_real", "F05", "440C0202", "BUS", "CH5"): ("Stocks rose ,COMMA then fell", "stocks rose comma then fell",
                                                        8000),
        ("et05_real", "F05", "440C0203", "CAF", "CH3"): ("The <Fed> held rates", "the fed held rates", 7200),
        ("et05_real", "M05", "440C0204", "PED", "CH5"): ("Oil prices climbed", "oil prices climbed", 6400),
        ("et05_real", "M05", "440C0205", "STR", "CH2"): ("Trading was light [door_slam]", "trading was light", 7200),
        ("et05_simu", "F05", "440C0201", "BUS", None): (None, "shares fell sharply", 9600),
        ("et05_simu", "F05", "440C0203", "CAF", None): (None, "the fed held rates", 7200),
        ("et05_simu", "M05", "440C0204", "PED", None): (None, "oil prices climbed", 6400),
        ("et05_simu", "M05", "440C0205", "STR", None): (None, "trading was light", 7200),
        ("tr05_real", "F01", "22GC010A", "STR", "CH5"): ("Bond prices rose", "bond prices rose", 5600),
        ("tr05_simu", "011", "011C0201", "CAF", "CH5"): (None, "the index rose", 4800),
    }
    annotations: dict[str, list[dict]] = {}
    lists: dict[str, list[str]] = {}
    dot_all: dict[str, list[str]] = {}
    expected: dict[str, dict[str, Expected]] = {}
    sources = {}
    for seed, ((split, spk, wsj, env, ch), (dot, norm, frames)) in enumerate(utts.items()):
        frames = max(frames, round(min_seconds * 16000))
        set_, kind = split.split("_")
        name = f"{spk}_{wsj}_{env}"
        folder = f"{set_}_{env.lower()}_{kind}"
        if set_ == "tr05":  # all six channels (and CH0, the close-talk mic, for real data); CH5 is used
            for n in ((0, 1, 5) if kind == "real" else (1, 5)):
                path = _write(six / folder / f"{name}.CH{n}.wav", frames, 16000, seed + 10 * n, "WAV")
                if f"CH{n}" == ch:
                    sources[f"{name}_{kind.upper()}"] = path
        else:
            sources[f"{name}_{kind.upper()}"] = _write(one / folder / f"{name}.wav", frames, 16000, seed, "WAV")
            if ch:
                lists.setdefault(split, []).append(f"{folder}/{name}.{ch}.wav")
        item = {"speaker": spk, "wsj_name": wsj, "environment": env, "start": 0.5, "end": 0.5 + frames / 16000}
        if dot is not None:
            item |= {"dot": dot, "prompt": dot}
        elif split != "tr05_simu":
            dot_all.setdefault(split, []).append(f"{norm.capitalize()} ({name})")
        annotations.setdefault(split, []).append(item)
        extra = {"environment": env.lower(), **({"channel": ch} if ch else {})}
        expected.setdefault(split, {})[f"{name}_{kind.upper()}"] = Expected(norm, frames / 16000, spk, extra=extra)
    for split, lines in dot_all.items():
        _text(data / f"transcriptions/{split}.dot_all", lines)
    wsj0_dir = root / "WSJ0"
    _text(wsj0_dir / "11-1.1/wsj0/si_tr_s/011/011c0200.dot", ["The index rose (011c0201)"])

    _garbage(one / "dt05_bus_real/F01_050C0105_BUS.wav")
    annotations["dt05_real"] += [
        {"speaker": "F01", "wsj_name": "050C0105", "environment": "BUS", "dot": "corrupt", "prompt": "corrupt"},
        {"speaker": "M03", "wsj_name": "050C010A", "environment": "PED", "dot": "missing", "prompt": "missing"}]
    lists["dt05_real"] += ["dt05_bus_real/F01_050C0105_BUS.CH2.wav", "dt05_ped_real/M03_050C010A_PED.CH5.wav"]
    for split, items in annotations.items():
        path = data / "annotations" / f"{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items, indent=1))
    for split, entries in lists.items():
        _text(data / "annotations" / f"{split}_1ch_track.list", entries)
    bad = {"F01_050C0105_BUS_REAL": CORRUPT, "M03_050C010A_PED_REAL": MISSING}
    return Fixture(root, expected, {"dt05_real": bad}, False, sources,
                   prepare_kwargs={"wsj0_dir": wsj0_dir} if wsj0 else {})


def make_tedlium(root: Path) -> Fixture:
    """TEDLIUM_release-3 with legacy/dev and data/ (train): one 16 kHz .sph per talk, .stm segments.

    Field 6 of an STM line is a label (`<o,f0,male>`, `<F0_M>`, `<NA>`), never words. `inter_segment_gap`
    and `ignore_time_segment_in_scoring` segments are not speech to learn from. Release 3's training
    transcripts are automatic: a segment with `<unk>` has a spoken word without a label, so it is dropped;
    some lines end with the talk's name and a counter, `(JaneDoe_2012-1)`, which is not speech either.
    """
    base = root / "TEDLIUM_release-3"
    talks = {  # (split folder, talk): (seconds of audio, [(start, end, label, raw transcript, normalized)])
        ("legacy/dev", "AlGore_2009"): (2.0, [
            (0.10, 0.60, "<o,f0,male>", "so it 's <unk> 100 years later", "so it's one hundred years later"),
            (0.70, 1.20, "<o,f0,male>", "we 're {NOISE} going to read(2) it", "we're going to read it")]),
        ("legacy/dev", "BillGates_2010"): (1.5, [
            (0.00, 0.45, "<F0_M>", "i don 't think so", "i don't think so"),
            (1.00, 2.50, "<NA>", "the end of the talk runs past the audio",
             "the end of the talk runs past the audio")]),
        ("data", "JaneDoe_2012"): (1.0, [
            (0.05, 0.45, "<o,f0,female>", "hello world (JaneDoe_2012-1)", "hello world")]),
    }
    expected: dict[str, dict[str, Expected]] = {}
    sources = {}
    for seed, ((folder, talk), (seconds, segments)) in enumerate(talks.items()):
        split = "dev" if folder == "legacy/dev" else "train"
        sph = _write(base / folder / "sph" / f"{talk}.sph", int(seconds * 16000), 16000, seed, "NIST")
        stm = [f"{talk} 1 inter_segment_gap 0.00 0.05 <o,,unknown> ignore_time_segment_in_scoring"]
        for start, end, label, raw, norm in segments:
            utt = f"{talk}-{round(start * 100):07d}-{round(end * 100):07d}"
            stm.append(f"{talk} 1 {talk} {start:.2f} {end:.2f} {label} {raw}")
            expected.setdefault(split, {})[utt] = Expected(norm, round(min(end, seconds) - start, 4), talk, start)
            sources[utt] = sph
        _text(base / folder / "stm" / f"{talk}.stm", stm)
    with open(base / "legacy/dev/stm/AlGore_2009.stm", "a") as f:  # an ignore segment whose label has no comma
        f.write("AlGore_2009 1 AlGore_2009 1.30 1.90 <F0_M> ignore_time_segment_in_scoring\n")
    with open(base / "data/stm/JaneDoe_2012.stm", "a") as f:
        f.write("JaneDoe_2012 1 JaneDoe_2012 0.50 0.90 <o,f0,female> hello <unk> again (JaneDoe_2012-2)\n")
    _garbage(base / "legacy/dev/sph/Corrupt_2011.sph")
    _text(base / "legacy/dev/stm/Corrupt_2011.stm", ["Corrupt_2011 1 Corrupt_2011 0.00 0.50 <o,f0,male> broken"])
    _text(base / "legacy/dev/stm/Missing_2012.stm", ["Missing_2012 1 Missing_2012 0.00 0.50 <o,f0,male> gone"])
    return Fixture(root, expected, {"dev": {"Corrupt_2011.sph": CORRUPT, "Missing_2012.sph": MISSING},
                                    "train": {"JaneDoe_2012-0000050-0000090": "<unk>"}}, True, sources,
                   excluded={"dev": 3, "train": 1})


def make_folder(root: Path) -> Fixture:
    """Your own recordings: audio in several formats and rates with `<name>.txt` (or `.lab`) beside each, in
    one folder per speaker, one of them a level deeper; none is at 16 kHz, so all are converted (a 16 kHz FLAC
    might one day be read in place).

    Left out and reported: audio without a transcript, a transcript without audio, a corrupt file, a
    transcript the normalizer can't read confidently ("3-2") and an empty one.
    """
    base = root / "recordings"
    utts = {  # id: (audio file, sample rate, format, transcript file, raw, normalized, frames)
        "alice/001": ("alice/001.flac", 44100, "FLAC", "alice/001.txt", "Hello world, it's 5 o'clock.",
                      "hello world it's five o'clock", 22050),
        "alice/002": ("alice/002.wav", 22050, "WAV", "alice/002.lab", "THE 2 BOYS WENT HOME", "the two boys went home",
                      11025),
        "bob/003": ("bob/003.ogg", 48000, "OGG", "bob/003.txt", "Good morning\nto you", "good morning to you", 24000),
        "bob/takes/004": ("bob/takes/004.wav", 8000, "WAV", "bob/takes/004.txt", "Café au lait", "cafe au lait", 4000),
    }
    expected, sources = {}, {}
    for seed, (utt, (audio, sr, fmt, transcript, raw, norm, frames)) in enumerate(utts.items()):
        path = base / audio
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), tone(frames, sr, seed), sr, format=fmt, subtype="VORBIS" if fmt == "OGG" else "PCM_16")
        sources[utt] = path
        _text(base / transcript, raw.split("\n"))
        expected[utt] = Expected(norm, frames / sr, Path(audio).parent.name)
    _write(base / "alice/003.wav", 4000, 16000, 7, "WAV")  # no transcript beside it
    _text(base / "bob/005.txt", ["a transcript whose audio was never copied"])
    _garbage(base / "bob/006.flac")
    _text(base / "bob/006.txt", ["a corrupt recording"])
    _write(base / "alice/007.wav", 4000, 16000, 8, "WAV")
    _text(base / "alice/007.txt", ["the score was 3-2"])
    _write(base / "alice/008.wav", 4000, 16000, 9, "WAV")
    _text(base / "alice/008.txt", [""])
    skipped = {"alice/003": "no transcript beside", "bob/005.txt": "no audio file beside it", "bob/006": CORRUPT,
               "alice/007": "can't be normalized confidently", "alice/008": "transcript is empty"}
    return Fixture(base, {"train": expected}, {"train": skipped}, True, sources)


def make_deepspeech(root: Path) -> Fixture:
    """Mozilla DeepSpeech's CSVs, `wav_filename,wav_filesize,transcript`, one per split, the 16 kHz WAVs (used in
    place) listed relative to the CSV's folder or by absolute path. No speakers.

    Reported: a row with a field too many and one without a path (by `file:line`), a corrupt WAV and one
    that is missing (by id).
    """
    rows = {  # split: [(wav path as listed, transcript, normalized, frames)]
        "train": [("clips/a1.wav", "she had your dark suit", "she had your dark suit", 8000),
                  ("clips/a2.wav", "in greasy wash water all year", "in greasy wash water all year", 7200),
                  (str(root / "clips/a3.wav"), "don't ask me to carry an oily rag", "don't ask me to carry an oily rag",
                   8800)],
        "dev": [("clips/b1.wav", '"well, yes," she said', "well yes she said", 6400)],
        "test": [("clips/c1.wav", "it's 9 a.m.", "it's nine a m", 5600)],
    }
    expected: dict[str, dict[str, Expected]] = {}
    sources = {}
    lines: dict[str, list[str]] = {}
    for seed, (split, (listed, raw, norm, frames)) in enumerate((s, row) for s, rs in rows.items() for row in rs):
        path = _write(root / "clips" / Path(listed).name, frames, 16000, seed, "WAV")
        utt = f"clips/{path.stem}"
        sources[utt] = path
        quoted = f'"{raw.replace(chr(34), chr(34) * 2)}"' if "," in raw or '"' in raw else raw
        lines.setdefault(split, ["wav_filename,wav_filesize,transcript"]).append(
            f"{listed},{path.stat().st_size},{quoted}")
        expected.setdefault(split, {})[utt] = Expected(norm, frames / 16000, None)
    _garbage(root / "clips/a4.wav")
    lines["train"] += ["clips/a4.wav,1024,a corrupt file", "clips/gone.wav,2048,never copied",
                       "clips/a5.wav,2048,one field,too many"]  # line 7
    lines["test"] += [",1024,no path"]  # line 3
    for split, text in lines.items():
        _text(root / f"{split}.csv", text)
    return Fixture(root, expected, {"train": {"clips/a4": CORRUPT, "clips/gone": MISSING,
                                              "train.csv:7": "4 fields where the header has 3"},
                                    "test": {"test.csv:3": "no audio path"}}, False, sources)


CV_COLUMNS = ["client_id", "path", "sentence_id", "sentence", "sentence_domain", "up_votes", "down_votes", "age",
              "gender", "accents", "variant", "locale", "segment"]


def make_common_voice(root: Path) -> Fixture:
    """A Common Voice release as it unpacks, `cv-corpus-<version>/en/{train,dev,test,validated}.tsv` with the
    clips as 48 kHz MP3 in `clips/` (all converted). The speaker is `client_id`; `age`, `gender` and `accents`
    are kept on the manifest line. Sentences are unquoted TSV fields (one opens with a quote mark).

    Reported: a clip the TSV lists that is missing (by id), a row with a stray tab (by `file:line`).
    """
    base = root / "cv-corpus-17.0-2024-03-15" / "en"
    clients = {"a" * 64: ("twenties", "male_masculine", "United States English"), "b" * 64: ("", "", ""),
               "c" * 64: ("fifties", "female_feminine", "England English")}
    clips = {  # split: [(client, clip, sentence, normalized, frames at 48 kHz)]
        "train": [("a" * 64, "common_voice_en_1001.mp3", "The 3 little pigs.", "the three little pigs", 28800),
                  ("a" * 64, "common_voice_en_1002.mp3", '"Hi," she said.', "hi she said", 24000),
                  ("b" * 64, "common_voice_en_1003.mp3", "Where is the station?", "where is the station", 33600)],
        "dev": [("c" * 64, "common_voice_en_2001.mp3", "Nice to meet you.", "nice to meet you", 26400)],
        "test": [("c" * 64, "common_voice_en_3001.mp3", "It rained all day.", "it rained all day", 31200)],
    }
    expected: dict[str, dict[str, Expected]] = {}
    sources = {}
    tables: dict[str, list[str]] = {}
    for seed, (split, (client, clip, sentence, norm, frames)) in enumerate(
            (s, item) for s, items in clips.items() for item in items):
        path = base / "clips" / clip
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), tone(frames, 48000, seed), 48000, format="MP3")
        sources[clip[:-4]] = path
        age, gender, accents = clients[client]
        row = [client, clip, f"{seed:064x}", sentence, "", "2", "0", age, gender, accents, "", "en", ""]
        tables.setdefault(split, ["\t".join(CV_COLUMNS)]).append("\t".join(row))
        extra = {k: v for k, v in (("age", age), ("gender", gender), ("accents", accents)) if v}
        expected.setdefault(split, {})[clip[:-4]] = Expected(norm, frames / 48000, client, extra=extra)
    tables["train"] += ["\t".join(["b" * 64, "common_voice_en_1004.mp3", "9" * 64, "Never recorded.", "", "2", "0", "",
                                   "", "", "", "en", ""]),
                        "\t".join(["b" * 64, "common_voice_en_1005.mp3", "8" * 64, "A stray\ttab", "", "2", "0", "", "",
                                   "", "", "en", ""])]  # line 6
    tables["validated"] = tables["train"][:1] + [r for s in ("train", "dev", "test") for r in tables[s][1:4]]
    for split, lines in tables.items():
        _text(base / f"{split}.tsv", lines)
    return Fixture(base, expected, {"train": {"common_voice_en_1004": MISSING,
                                              "train.tsv:6": "14 fields where the header has 13"}}, True, sources)


def librispeech_tarballs(corpus_dir: Path, out: Path) -> dict[str, dict[str, str]]:
    """Pack `corpus_dir/LibriSpeech` as openslr serves it: `out/resources/12/<split>.tar.gz` per split (its folder
    and the top-level *.TXT files, under `LibriSpeech/`) and every file beside `LibriSpeech/` (the LM files) in
    `out/resources/11/`. Returns their checksum table, `{name: {"md5": ..., "sha256": ...}}`."""
    import hashlib
    import shutil
    import tarfile

    base = corpus_dir / "LibriSpeech"
    (out / "resources" / "12").mkdir(parents=True, exist_ok=True)
    (out / "resources" / "11").mkdir(parents=True, exist_ok=True)
    files = []
    for split in sorted(p for p in base.iterdir() if p.is_dir()):
        tarball = out / "resources" / "12" / f"{split.name}.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            for txt in sorted(base.glob("*.TXT")):
                tar.add(txt, f"LibriSpeech/{txt.name}")
            tar.add(split, f"LibriSpeech/{split.name}")
        files.append(tarball)
    for lm in sorted(p for p in corpus_dir.iterdir() if p.is_file()):
        files.append(Path(shutil.copy(lm, out / "resources" / "11" / lm.name)))
    return {f.name: {"md5": hashlib.md5(f.read_bytes()).hexdigest(),
                     "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in files}
