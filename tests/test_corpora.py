"""Corpus importers against tiny fake corpora in the real on-disk layouts (deepspeech2/data/corpora/fixtures.py)."""

import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.signal
import soundfile as sf

from deepspeech2.audio import load_audio
from deepspeech2.data import corpora
from deepspeech2.data.corpora import _common, fixtures
from deepspeech2.data.manifest import read_manifest

CASES = {
    "librispeech": (fixtures.make_librispeech, corpora.prepare_librispeech, "en"),
    "voxforge": (fixtures.make_voxforge, corpora.prepare_voxforge, "en"),
    "aishell": (fixtures.make_aishell, corpora.prepare_aishell, "zh"),
    "wsj": (fixtures.make_wsj, corpora.prepare_wsj, "en"),
    "chime4": (fixtures.make_chime4, corpora.prepare_chime4, "en"),
    "tedlium": (fixtures.make_tedlium, corpora.prepare_tedlium, "en"),
}


def _mtimes(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", list(CASES))
def test_import_then_reimport(tmp_path, name):
    make, prepare, language = CASES[name]
    fx = make(tmp_path / "corpus")
    out = tmp_path / "out"
    result = prepare(fx.corpus_dir, out, num_workers=2)

    assert sorted(result) == sorted(fx.expected)
    for split, expected in fx.expected.items():
        utts = result[split]
        # The manifest on disk reads back to exactly what was returned.
        assert read_manifest(out / f"{split}.jsonl") == utts
        assert [u.extra["id"] for u in read_manifest(out / f"{split}.jsonl")] == [u.extra["id"] for u in utts]
        assert {u.extra["id"] for u in utts} == set(expected)
        for u in utts:
            want = expected[u.extra["id"]]
            assert (u.text, u.speaker, u.language) == (want.text, want.speaker, language)
            assert u.offset == pytest.approx(want.offset)
            assert u.duration == pytest.approx(want.duration, abs=1e-3)
            info = sf.info(u.audio_filepath)
            assert (info.format, info.subtype, info.samplerate, info.channels) == ("WAV", "PCM_16", 16000, 1)
            if u.offset == 0 and name != "tedlium":  # whole-file utterances: duration is the file's length
                assert u.duration == pytest.approx(info.frames / info.samplerate, abs=1e-4)
            else:  # segments lie inside their file
                assert u.offset + u.duration <= info.frames / info.samplerate + 1e-4
            under = out / "wav" if fx.converted else fx.corpus_dir
            assert Path(u.audio_filepath).is_relative_to(under.resolve()), u.audio_filepath
            if not fx.converted:
                assert Path(u.audio_filepath) == fx.sources[u.extra["id"]].resolve()

        report = json.loads((out / f"{split}.report.json").read_text())
        assert (report["corpus"], report["split"], report["kept"]) == (name, split, len(utts))
        assert report["hours"] == pytest.approx(sum(u.duration for u in utts) / 3600, abs=1e-4)
        listed = [s.get("id") or s.get("path") for s in report["skipped"]]
        for bad in fx.skipped.get(split, []):
            assert any(bad in x for x in listed), (bad, report["skipped"])
        assert len(report["skipped"]) == len(fx.skipped.get(split, []))
        reasons = " ".join(s["reason"] for s in report["skipped"])
        if fx.skipped.get(split):
            assert "missing" in reasons and "could not be read" in reasons

    # Running again converts nothing, rewrites nothing and returns the same manifests.
    before = _mtimes(out)
    assert prepare(fx.corpus_dir, out, num_workers=2) == result
    assert _mtimes(out) == before


def test_converted_audio_matches_reference(tmp_path):
    # FLAC -> WAV is lossless; 48 kHz -> 16 kHz equals scipy's polyphase resampler on the same samples.
    fx = fixtures.make_librispeech(tmp_path / "ls")
    utts = corpora.prepare_librispeech(fx.corpus_dir, tmp_path / "out_ls", num_workers=1)["dev-clean"]
    for u in utts:
        src, _ = sf.read(fx.sources[u.extra["id"]], dtype="int16")
        dst, _ = sf.read(u.audio_filepath, dtype="int16")
        np.testing.assert_allclose(dst, src, atol=1)
    fx = fixtures.make_voxforge(tmp_path / "vf")
    utts = corpora.prepare_voxforge(fx.corpus_dir, tmp_path / "out_vf")["train"]
    u = next(u for u in utts if u.extra["id"] == "Aaron-20080318-kdl/b0019")
    src, sr = sf.read(fx.sources["Aaron-20080318-kdl/b0019"], dtype="float32")
    assert sr == 48000
    dst, _ = sf.read(u.audio_filepath, dtype="float32")
    np.testing.assert_allclose(dst, scipy.signal.resample_poly(src, 1, 3), atol=2e-4)
    assert Path(u.audio_filepath) == (tmp_path / "out_vf/wav/Aaron-20080318-kdl/wav/b0019.wav").resolve()


def test_tedlium_converts_each_talk_once(tmp_path):
    fx = fixtures.make_tedlium(tmp_path / "ted")
    out = corpora.prepare_tedlium(fx.corpus_dir, tmp_path / "out")
    files = {u.audio_filepath for u in out["dev"]}
    assert len(files) == 2 and len(out["dev"]) == 4
    assert sorted(p.name for p in (tmp_path / "out/wav").rglob("*.wav")) == \
        ["AlGore_2009.wav", "BillGates_2010.wav", "JaneDoe_2012.wav"]
    # The stored line carries offset and duration; the audio slice has exactly that many samples.
    line = json.loads((tmp_path / "out/dev.jsonl").read_text().splitlines()[0])
    assert line["offset"] == 0.1 and line["duration"] == 0.5 and not Path(line["audio_filepath"]).is_absolute()
    u = out["dev"][0]
    segment = load_audio(u.audio_filepath, offset=u.offset, duration=u.duration)
    original, sr = sf.read(fx.sources[u.extra["id"]], dtype="float32")
    assert sr == 16000 and segment.shape == (8000,)
    np.testing.assert_allclose(segment, original[1600:9600], atol=1 / 32768)


def _shorten_sphere(path: Path) -> None:
    header = (b"NIST_1A\n   1024\nchannel_count -i 1\nsample_rate -i 16000\nsample_n_bytes -i 2\n"
              b"sample_coding -s26 pcm,embedded-shorten-v2.00\nsample_count -i 8000\nend_head\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.ljust(1024, b" ") + b"ajkq\x00\x01" * 200)


def test_shorten_sphere_needs_sph2pipe(tmp_path, monkeypatch):
    fx = fixtures.make_wsj(tmp_path / "wsj")
    _shorten_sphere(tmp_path / "wsj/11-14.1/wsj0/si_et_20/440/440c0201.wv1")
    assert _common.sphere_header(tmp_path / "wsj/11-14.1/wsj0/si_et_20/440/440c0201.wv1")["sample_coding"] == \
        "pcm,embedded-shorten-v2.00"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = corpora.prepare_wsj(fx.corpus_dir, tmp_path / "out", splits=["test_eval92"])
    assert out["test_eval92"] == []
    (skip,) = json.loads((tmp_path / "out/test_eval92.report.json").read_text())["skipped"]
    assert skip["id"] == "440c0201" and "install sph2pipe" in skip["reason"]

    # With sph2pipe on PATH (a stand-in that checks its arguments and writes a 0.5 s WAV) it is decoded.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sph2pipe"
    fake.write_text(f"#!{sys.executable}\nimport sys, numpy as np, soundfile as sf\n"
                    "assert sys.argv[1:4] == ['-f', 'wav', '-p'], sys.argv\n"
                    "sf.write(sys.argv[5], np.full(8000, 1000, np.int16), 16000, subtype='PCM_16')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (u,) = corpora.prepare_wsj(fx.corpus_dir, tmp_path / "out2", splits=["test_eval92"])["test_eval92"]
    assert u.duration == 0.5 and u.text == "stocks closed higher"
    assert sf.read(u.audio_filepath, dtype="int16")[0].tolist() == [1000] * 8000


@pytest.mark.parametrize("name", list(CASES))
def test_bad_corpus_dir(tmp_path, name):
    prepare = CASES[name][1]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        prepare(tmp_path / "nowhere", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="does not look like the corpus: expected"):
        prepare(tmp_path / "empty", tmp_path / "out")


def test_bad_arguments(tmp_path):
    fx = fixtures.make_librispeech(tmp_path / "ls")
    with pytest.raises(ValueError, match=r"`splits` \['train-clean-100'\] not found.*dev-clean"):
        corpora.prepare_librispeech(fx.corpus_dir, tmp_path / "out", splits=["train-clean-100"])
    with pytest.raises(ValueError, match="`num_workers` must be >= 1, got 0"):
        corpora.prepare_librispeech(fx.corpus_dir, tmp_path / "out", num_workers=0)
    packed = tmp_path / "aishell/data_aishell"
    (packed / "transcript").mkdir(parents=True)
    (packed / "transcript/aishell_transcript_v0.8.txt").write_text("")
    (packed / "wav").mkdir()
    (packed / "wav/S0002.tar.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="unpack them first"):
        corpora.prepare_aishell(tmp_path / "aishell", tmp_path / "out")


def test_empty_transcript_and_no_transcript_are_reported(tmp_path):
    fx = fixtures.make_librispeech(tmp_path / "ls")
    trans = tmp_path / "ls/LibriSpeech/test-clean/1089/134686/1089-134686.trans.txt"
    trans.write_text(trans.read_text() + "1089-134686-0001 -- ?!\n")
    fixtures._write(trans.parent / "1089-134686-0001.flac", 4000, 16000, 9, "FLAC")
    fixtures._write(trans.parent / "1089-134686-0002.flac", 4000, 16000, 9, "FLAC")  # no transcript line
    out = corpora.prepare_librispeech(fx.corpus_dir, tmp_path / "out", splits=["test-clean"])
    assert [u.extra["id"] for u in out["test-clean"]] == ["1089-134686-0000"]
    skipped = json.loads((tmp_path / "out/test-clean.report.json").read_text())["skipped"]
    assert skipped == [
        {"id": "1089-134686-0001", "reason": "transcript is empty after normalization"},
        {"id": "1089-134686-0002", "reason": f"no transcript line in `{trans.parent.resolve()}/*.trans.txt`"},
    ]


@pytest.mark.parametrize("raw, want", [
    (r"[loud_breath] I\. B\. M\. ,COMMA isn\'t *sp*ecial <the> deal . ~", "i b m comma isn't special the deal"),
    ('The "DOUBLE-QUOTE dow --DASH (LEFT-PAREN rose [door_slam>] %PERCENT .PERIOD [<door_slam]',
     "the double quote dow dash left paren rose percent period"),
    ("Bonds [/phone_ring] rose [phone_ring/] ?QUESTION-MARK", "bonds rose question mark"),
])
def test_normalize_wsj(raw, want):
    assert corpora.normalize_wsj(raw) == want


@pytest.mark.parametrize("raw, want", [
    ("so it 's <unk> like 100 years {NOISE} read(2)", "so it's like one hundred years read"),
    ("we 're here and they 've gone", "we're here and they've gone"),
    ("<unk> <unk>", ""),
])
def test_normalize_tedlium(raw, want):
    assert corpora.normalize_tedlium(raw) == want
