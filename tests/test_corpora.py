"""Corpus importers against tiny fake corpora in the real on-disk layouts (tests/corpus_fixtures.py)."""

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
from deepspeech2.data.manifest import read_manifest
from deepspeech2.prepare import aishell, chime4, folder, importer, librispeech, tedlium, voxforge, wsj

import corpus_fixtures

CASES = {
    "librispeech": (corpus_fixtures.make_librispeech, librispeech.prepare_librispeech, "en"),
    "voxforge": (corpus_fixtures.make_voxforge, voxforge.prepare_voxforge, "en"),
    "aishell": (corpus_fixtures.make_aishell, aishell.prepare_aishell, "zh"),
    "wsj": (corpus_fixtures.make_wsj, wsj.prepare_wsj, "en"),
    "chime4": (corpus_fixtures.make_chime4, chime4.prepare_chime4, "en"),
    "tedlium": (corpus_fixtures.make_tedlium, tedlium.prepare_tedlium, "en"),
    # Your own data (`ds2-prepare folder`), in its three shapes; the report's corpus is "folder" for each.
    "folder": (corpus_fixtures.make_folder, folder.prepare_folder, "en"),
    "folder-deepspeech": (corpus_fixtures.make_deepspeech, folder.prepare_folder, "en"),
    "folder-commonvoice": (corpus_fixtures.make_common_voice, folder.prepare_folder, "en"),
}


def _mtimes(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", list(CASES))
def test_import_then_reimport(tmp_path, name):
    make, prepare, language = CASES[name]
    fx = make(tmp_path / "corpus")
    out = tmp_path / "out"
    result = prepare(fx.corpus_dir, out, num_workers=2, **fx.prepare_kwargs)

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
            assert {k: u.extra.get(k) for k in want.extra} == dict(want.extra)
            assert (u.offset or 0.0) == pytest.approx(want.offset)
            assert u.duration == pytest.approx(want.duration, abs=1e-3)
            info = sf.info(u.audio_filepath)
            assert (info.subtype, info.samplerate, info.channels) == ("PCM_16", 16000, 1)
            converted = fx.converted and u.extra["id"] not in fx.in_place
            assert info.format == "WAV" if converted else info.format == sf.info(fx.sources[u.extra["id"]]).format
            if not u.is_segment:  # whole-file utterances: duration is the file's length
                assert u.duration == pytest.approx(info.frames / info.samplerate, abs=1e-4)
            else:  # segments lie inside their file
                assert u.offset + u.duration <= info.frames / info.samplerate + 1e-4
            under = out / "wav" if converted else fx.corpus_dir
            assert Path(u.audio_filepath).is_relative_to(under.resolve()), u.audio_filepath
            if not converted:
                assert Path(u.audio_filepath) == fx.sources[u.extra["id"]].resolve()

        report = json.loads((out / f"{split}.report.json").read_text())
        assert (report["corpus"], report["split"], report["kept"]) == (name.split("-")[0], split, len(utts))
        assert report["hours"] == pytest.approx(sum(u.duration for u in utts) / 3600, abs=1e-4)
        for bad, why in fx.skipped.get(split, {}).items():
            assert any(bad in (s.get("id") or s.get("path")) and why in s["reason"] for s in report["skipped"]), \
                (bad, why, report["skipped"])
        assert len(report["skipped"]) == len(fx.skipped.get(split, {})), report["skipped"]
        assert sum(report["excluded"].values()) == fx.excluded.get(split, 0), report["excluded"]

    # Running again converts nothing, rewrites nothing and returns the same manifests.
    before = _mtimes(out)
    assert prepare(fx.corpus_dir, out, num_workers=2, **fx.prepare_kwargs) == result
    assert _mtimes(out) == before


def test_converted_audio_matches_reference(tmp_path):
    # 48 kHz -> 16 kHz equals scipy's polyphase resampler on the same samples.
    fx = corpus_fixtures.make_voxforge(tmp_path / "vf")
    utts = voxforge.prepare_voxforge(fx.corpus_dir, tmp_path / "out_vf")["train"]
    u = next(u for u in utts if u.extra["id"] == "Aaron-20080318-kdl/b0019")
    src, sr = sf.read(fx.sources["Aaron-20080318-kdl/b0019"], dtype="float32")
    assert sr == 48000
    dst, _ = sf.read(u.audio_filepath, dtype="float32")
    np.testing.assert_allclose(dst, scipy.signal.resample_poly(src, 1, 3), atol=2e-4)
    assert Path(u.audio_filepath) == (tmp_path / "out_vf/wav/Aaron-20080318-kdl/wav/b0019.wav").resolve()


def test_tedlium_converts_each_talk_once(tmp_path):
    fx = corpus_fixtures.make_tedlium(tmp_path / "ted")
    out = tedlium.prepare_tedlium(fx.corpus_dir, tmp_path / "out")
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
    fx = corpus_fixtures.make_wsj(tmp_path / "wsj")
    _shorten_sphere(tmp_path / "wsj/11-14.1/wsj0/si_et_20/440/440c0201.wv1")
    assert importer.sphere_header(tmp_path / "wsj/11-14.1/wsj0/si_et_20/440/440c0201.wv1")["sample_coding"] == \
        "pcm,embedded-shorten-v2.00"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = wsj.prepare_wsj(fx.corpus_dir, tmp_path / "out", splits=["test_eval92"])
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
    (u,) = wsj.prepare_wsj(fx.corpus_dir, tmp_path / "out2", splits=["test_eval92"])["test_eval92"]
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
    fx = corpus_fixtures.make_librispeech(tmp_path / "ls")
    with pytest.raises(ValueError, match=r"`splits` \['train-clean-100'\] not found.*dev-clean"):
        librispeech.prepare_librispeech(fx.corpus_dir, tmp_path / "out", splits=["train-clean-100"])
    with pytest.raises(ValueError, match="`num_workers` must be >= 1, got 0"):
        librispeech.prepare_librispeech(fx.corpus_dir, tmp_path / "out", num_workers=0)
    packed = tmp_path / "aishell/data_aishell"
    (packed / "transcript").mkdir(parents=True)
    (packed / "transcript/aishell_transcript_v0.8.txt").write_text("")
    (packed / "wav").mkdir()
    (packed / "wav/S0002.tar.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="unpack them first"):
        aishell.prepare_aishell(tmp_path / "aishell", tmp_path / "out")


def test_empty_transcript_and_no_transcript_are_reported(tmp_path):
    fx = corpus_fixtures.make_librispeech(tmp_path / "ls")
    trans = tmp_path / "ls/LibriSpeech/test-clean/1089/134686/1089-134686.trans.txt"
    trans.write_text(trans.read_text() + "1089-134686-0001 -- ?!\n")
    corpus_fixtures._write(trans.parent / "1089-134686-0001.flac", 4000, 16000, 9, "FLAC")
    corpus_fixtures._write(trans.parent / "1089-134686-0002.flac", 4000, 16000, 9, "FLAC")  # no transcript line
    out = librispeech.prepare_librispeech(fx.corpus_dir, tmp_path / "out", splits=["test-clean"])
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
    # Titles and company suffixes are said in full; ambiguous ones (St. = saint or street) stay as written.
    (r"Mr\. and Mrs\. Lee of Acme Corp\. met Dr\. Roe in St\. Louis", "mister and missus lee of acme "
     "corporation met doctor roe in st louis"),
    (r"MR\. JONES JR\. ;SEMI-COLON Inc\.", "mister jones junior semi colon incorporated"),
    ("well: so: it :COLON ends~", "well so it colon ends"),  # a lengthened word, verbalized colon, truncation
])
def test_normalize_wsj(raw, want):
    assert wsj.normalize_wsj(raw) == want


def _ndx(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(";; File: %s\n;;\n" % path.name + "".join(line + "\n" for line in lines))


def test_wsj_splits_have_kaldi_sizes(tmp_path, caplog):
    # Index files of the real sizes (no audio needed): the splits are what Kaldi's wsj_data_prep.sh builds.
    si84 = [f"11_{1 + s // 40}_1:wsj0/si_tr_s/{s:03x}/{s:03x}c02{u:02x}.wv1" for s in range(1, 84) for u in range(86)]
    spk401 = [f"11_2_1:wsj0/si_tr_s/401/401c02{u:02x}.wv1" for u in range(40)]
    _ndx(tmp_path / "11-13.1/wsj0/doc/indices/train/tr_s_wv1.ndx", si84[:3000] + spk401 + si84[3000:])
    _ndx(tmp_path / "13-34.1/wsj1/doc/indices/si_tr_s.ndx",
         [f"13_{2 + n // 5000}_1:wsj1/si_tr_s/{n // 150:03d}/{n:08d}.wv1" for n in range(30278)])
    _ndx(tmp_path / "11-13.1/wsj0/doc/indices/test/nvp/si_et_20.ndx",
         [f"11_14_1:wsj0/si_et_20/440/440c02{n:02d}" for n in range(333)])  # no extension, as on the disc
    dev = [f"13_16_1:wsj1/si_dt_05/4k0/{n:08d}.wv1" for n in range(513)]
    _ndx(tmp_path / "13-34.1/wsj1/doc/indices/h1_p0.ndx", [d.replace("_05/", "_20/") for d in dev[:503]])
    _ndx(tmp_path / "13-34.1/wsj1/doc/indices/h2_p0.ndx", dev)
    # The Nov'93 eval index names a wrong disc (13_32_1); the path alone finds the file. A decoy index of the
    # same name on another disc is not the one Kaldi reads.
    _ndx(tmp_path / "13-32.1/wsj1/doc/indices/wsj1/eval/h1_p0.ndx",
         [f"13_32_1:wsj1/si_et_h1/wsj64k/{n:08d}.wv1" for n in range(213)])
    _ndx(tmp_path / "13-32.1/wsj1/doc/indices/h1_p0.ndx", ["13_32_1:wsj1/si_dt_20/4k0/decoy.wv1"])
    with caplog.at_level("WARNING"):
        found = wsj.read_splits(tmp_path)
    assert {s: len(ix.entries) for s, ix in found.items()} == {
        "train_si84": 7138, "train_si284": 37416, "test_eval92": 333, "test_dev93": 503, "test_dev93_5k": 513,
        "test_eval93": 213}
    assert not caplog.records
    assert found["train_si84"].excluded == found["train_si284"].excluded == 40
    assert not any("/401/" in rel for _, rel in found["train_si284"].entries)
    assert found["test_eval92"].entries[0] == ("11_14_1", "wsj0/si_et_20/440/440c0200.wv1")
    assert found["test_dev93"].index_files == [tmp_path / "13-34.1/wsj1/doc/indices/h1_p0.ndx"]

    # A damaged index (a line lost) is imported but logged against the standard size.
    _ndx(tmp_path / "13-34.1/wsj1/doc/indices/h2_p0.ndx", dev[:512])
    with caplog.at_level("WARNING"):
        assert len(wsj.read_splits(tmp_path)["test_dev93_5k"].entries) == 512
    assert "test_dev93_5k" in caplog.text and "512" in caplog.text and "513" in caplog.text


def test_wsj_needs_the_index_files(tmp_path):
    fx = corpus_fixtures.make_wsj(tmp_path / "wsj")
    for ndx in (tmp_path / "wsj").rglob("*.ndx"):
        ndx.unlink()
    with pytest.raises(ValueError, match=r"no index file.*11-13\.1.*tr_s_wv1\.ndx"):
        wsj.prepare_wsj(fx.corpus_dir, tmp_path / "out")


def test_chime4_tr05_simu_text_comes_from_wsj0(tmp_path):
    fx = corpus_fixtures.make_chime4(tmp_path / "c", wsj0=False)
    data = tmp_path / "c/CHiME3/data"
    # Without WSJ0, tr05_simu's utterances have no transcript: skipped, with the fix in the reason.
    out = chime4.prepare_chime4(data, tmp_path / "out", splits=["tr05_simu", "et05_simu"])
    assert out["tr05_simu"] == [] and [u.text for u in out["et05_simu"]] == [
        "shares fell sharply", "the fed held rates", "oil prices climbed", "trading was light"]  # from .dot_all
    (skip,) = json.loads((tmp_path / "out/tr05_simu.report.json").read_text())["skipped"]
    assert skip["id"] == "011_011C0201_CAF_SIMU" and "wsj0_dir" in skip["reason"]
    # Kaldi's default place for it, data/WSJ0, is used when it exists; an explicit `wsj0_dir` must exist.
    (tmp_path / "c/WSJ0").rename(data / "WSJ0")
    (u,) = chime4.prepare_chime4(tmp_path / "c", tmp_path / "out2", splits=["tr05_simu"])["tr05_simu"]
    assert (u.text, u.speaker, u.extra["environment"], u.extra["channel"]) == ("the index rose", "011", "caf", "CH5")
    assert Path(u.audio_filepath).name == "011_011C0201_CAF.CH5.wav"
    with pytest.raises(FileNotFoundError, match="wsj0_dir.*nowhere"):
        chime4.prepare_chime4(tmp_path / "c", tmp_path / "out3", wsj0_dir=tmp_path / "nowhere")


def test_chime4_finds_the_data_folder(tmp_path):
    corpus_fixtures.make_chime4(tmp_path / "c")
    data = tmp_path / "c/CHiME3/data"
    for corpus_dir in (tmp_path / "c", tmp_path / "c/CHiME3", data):
        assert chime4.find_data(corpus_dir) == data
    (tmp_path / "c/CHiME4").mkdir()
    (tmp_path / "c/CHiME3").rename(tmp_path / "c/CHiME4/CHiME3")  # unpacked into a folder named CHiME4
    assert chime4.find_data(tmp_path / "c") == tmp_path / "c/CHiME4/CHiME3/data"


@pytest.mark.parametrize("session, speaker", [
    ("Aaron-20080318-kdl", "Aaron"),
    ("Aaron-20080320", "Aaron"),  # no suffix
    ("Kevin-2009041514a-xyz_2", "Kevin"),  # 10 digits, a letter, a tail
    ("ralfherzog-20071220-de34_1", "ralfherzog"),
    ("jim-bob-20100101-abc", "jim-bob"),  # a hyphen in the user name
    ("anonymous-20080504-qvg", "anonymous-20080504-qvg"),  # the shared account: one speaker per session
    ("Aaron-2008", "Aaron-2008"),  # not a session name: the folder is its own speaker
])
def test_voxforge_speaker(session, speaker):
    assert voxforge._speaker(session) == speaker


@pytest.mark.parametrize("raw, want", [
    ("ａ股 市场 的 ｋ 线", "A股市场的K线"),
    ("卡拉 ＯＫ 和 ktv", "卡拉OK和KTV"),
    ("而 对 楼市 成交", "而对楼市成交"),
])
def test_normalize_aishell_keeps_latin_letters(raw, want):
    assert aishell.normalize_aishell(raw) == want


@pytest.mark.parametrize("raw, want", [
    ("so it 's <unk> like 100 years {NOISE} read(2)", "so it's like one hundred years read"),
    ("we 're here and they 've gone", "we're here and they've gone"),
    ("<unk> <unk>", ""),
])
def test_normalize_tedlium(raw, want):
    assert tedlium.normalize_tedlium(raw) == want


def test_transcripts_that_cant_be_normalized_are_dropped_with_the_reason():
    from deepspeech2.prepare.aishell import normalize_aishell
    from deepspeech2.prepare.importer import normalized
    from deepspeech2.text import normalize_english

    assert normalized(normalize_english, "Chapter 9 begins") == ("chapter nine begins", "")
    text, problem = normalized(normalize_english, "the score was 3-2")
    assert text == "" and "`3-2`" in problem
    assert normalized(normalize_aishell, "ａ股 市场") == ("A股市场", "")
    text, problem = normalized(normalize_aishell, "98年 的 GDP")  # 1998, or 98 years?
    assert text == "" and "98" in problem


def test_wsj_lm_text(tmp_path):
    """WSJ1's compressed LM training text: markup lines dropped, sentences cleaned as the transcripts are, a line the
    normalizer can't read left out and counted, a file gzip can't read reported; a second run rewrites nothing."""
    fx = corpus_fixtures.make_wsj(tmp_path / "wsj")
    out = tmp_path / "lm" / "lm_text.txt"
    report = wsj.prepare_wsj_lm_text(fx.corpus_dir, out)
    want = [text for lines in corpus_fixtures.WSJ_LM_TEXT.values() for _, text in lines if text]
    assert out.read_text().splitlines() == want
    assert (report["files"], report["sentences"], report["words"], report["dropped"], report["unreadable"]) == \
        (3, len(want), sum(len(t.split()) for t in want), 1, [])
    assert json.loads((tmp_path / "lm" / "lm_text.txt.json").read_text()) == report
    before = _mtimes(tmp_path / "lm")
    assert wsj.prepare_wsj_lm_text(fx.corpus_dir, out) == report
    assert _mtimes(tmp_path / "lm") == before

    bad = tmp_path / "wsj/13-32.1/wsj1/doc/lng_modl/lm_train/np_data/89/w9_002.z"
    bad.write_bytes(corpus_fixtures.GARBAGE)
    report = wsj.prepare_wsj_lm_text(fx.corpus_dir, out)
    assert out.read_text().splitlines() == want and report["files"] == 4
    (unreadable,) = report["unreadable"]
    assert unreadable["path"] == str(bad) and "could not be decompressed: gzip: " in unreadable["reason"]

    with pytest.raises(ValueError, match=r"no WSJ LM training text below `corpus_dir`.*13-32.1's wsj1/doc/lng_modl"):
        wsj.prepare_wsj_lm_text(tmp_path / "wsj/11-1.1", tmp_path / "x.txt")


def test_flac_is_used_in_place_and_every_stage_reads_it_as_the_wav(tmp_path):
    """LibriSpeech's FLACs (16 kHz mono 16-bit) are not copied: the manifest points at them, and validation,
    make-shards, compute-stats and the evaluation/inference reader (load_utterance) get from them exactly what
    they get from the same audio as 16-bit WAVs."""
    from deepspeech2.data.manifest import load_utterance, replace, write_manifest
    from deepspeech2.data.shards import ShardConfig, make_shards, read_shards, shard_paths
    from deepspeech2.features import FeatureConfig
    from deepspeech2.prepare.stats import compute_mean_std
    from deepspeech2.prepare.validate import ValidationConfig, validate_manifest
    from deepspeech2.vocab import Vocabulary

    fx = corpus_fixtures.make_librispeech(tmp_path / "ls")
    out = tmp_path / "out"
    utts = librispeech.prepare_librispeech(fx.corpus_dir, out)["dev-clean"]
    assert not (out / "wav").exists()  # nothing converted, nothing copied
    assert [Path(u.audio_filepath) for u in utts] == [fx.sources[u.extra["id"]].resolve() for u in utts]
    wavs = []
    for u in utts:  # the reference: the same samples as WAV files
        pcm, sr = sf.read(u.audio_filepath, dtype="int16")
        sf.write(tmp_path / f"{u.extra['id']}.wav", pcm, sr, subtype="PCM_16")
        wavs.append(replace(u, audio_filepath=str(tmp_path / f"{u.extra['id']}.wav")))
    write_manifest(tmp_path / "wav.jsonl", wavs)
    vocab = Vocabulary.english()

    report = validate_manifest(out / "dev-clean.jsonl", ValidationConfig(vocab=vocab, strict=True, model=None))  # short clips
    assert report.ok and not report.warnings and len(report.good) == len(utts)

    make_shards(out / "dev-clean.jsonl", vocab, ShardConfig(str(tmp_path / "shards"), num_shards=1), progress=False)
    records = {r["id"].numpy().decode(): r["pcm"].numpy() for r in read_shards(shard_paths(tmp_path / "shards"))}
    assert len(records) == len(utts)
    for u, w in zip(utts, wavs):
        np.testing.assert_array_equal(records[u.extra["id"]], sf.read(w.audio_filepath, dtype="int16")[0])
        np.testing.assert_array_equal(load_utterance(u), load_utterance(w))

    flac_stats = compute_mean_std([out / "dev-clean.jsonl"], FeatureConfig())
    wav_stats = compute_mean_std([tmp_path / "wav.jsonl"], FeatureConfig())
    assert flac_stats.num_utterances == len(utts) and flac_stats.num_skipped == 0
    np.testing.assert_array_equal(flac_stats.mean, wav_stats.mean)
    np.testing.assert_array_equal(flac_stats.std, wav_stats.std)


def test_ds2_prepare_lists_what_it_skipped(tmp_path):
    import subprocess

    fx = corpus_fixtures.make_librispeech(tmp_path / "ls")
    out = subprocess.run([str(Path(sys.executable).parent / "ds2-prepare"), "librispeech", "--corpus_dir",
                          str(fx.corpus_dir), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    report = tmp_path / "out" / "dev-clean.report.json"
    assert out.stdout.splitlines() == [
        f"{tmp_path / 'out'}/dev-clean.jsonl: 4 utterances, 0.00 h",
        *[f"  skipped {s['id']}: {s['reason']}" for s in json.loads(report.read_text())["skipped"]],
        f"  2 skipped, listed in {report}",
        f"{tmp_path / 'out'}/test-clean.jsonl: 1 utterances, 0.00 h"]
    assert "174-50561-0002: audio file" in out.stdout and "84-121123-0002: audio file" in out.stdout
