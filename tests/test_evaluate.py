"""Evaluation and inference: ds2-eval scoring as the trainer's dev set does (English and Mandarin), ds2-eval on
imported corpora (WSJ, LibriSpeech, CHiME-4 by environment, TED-LIUM segments), skipped audio, and ds2-infer."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jiwer
import keras
import numpy as np
import pytest
import soundfile as sf

from deepspeech2.audio import load_audio, save_wav
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.data.manifest import Utterance, read_manifest, write_manifest
from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.data.shards import ShardConfig, make_shards
from deepspeech2.decode import DecoderConfig
from deepspeech2.evaluate import EvalConfig, evaluate, format_report
from deepspeech2.features import FeatureConfig
from deepspeech2.inference import compute_log_probs
from deepspeech2.geometry import output_steps
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.prepare import chime4, librispeech, tedlium, wsj
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.train import dev
from deepspeech2.vocab import Vocabulary

import corpus_fixtures
from factories import make_manifest

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    """A tiny model bundle (untrained weights: these tests check the plumbing and the scoring, not accuracy)."""
    d = tmp_path_factory.mktemp("bundle")
    manifest, _ = make_manifest(d, n=4)
    stats = compute_mean_std([manifest], FeatureConfig())
    return save_bundle(d / "model", build_model(TINY), TINY, Vocabulary.english(), stats, {"note": "untrained"})


ZH_TEXTS = ["你好吗", "我很好 谢谢", "今天天气不错", "你好 今天"]  # spaced words too, as AISHELL's


@pytest.mark.parametrize("language", ["en", "zh"])
def test_trainer_dev_scores_equal_ds2_eval(tmp_path, language):
    """The trainer's dev WER/CER (`deepspeech2.train.dev.dev_scores`) and ds2-eval's (`evaluate`) score the same
    transcripts alike; for Mandarin both count characters as words, so WER == CER."""
    manifest, utts = make_manifest(tmp_path, n=4)
    if language == "zh":
        utts = [dataclasses.replace(u, text=t, language="zh") for u, t in zip(utts, ZH_TEXTS)]
        write_manifest(manifest, utts)
        vocab = Vocabulary.from_texts([t.replace(" ", "") for t in ZH_TEXTS])  # characters, no space
    else:
        vocab = Vocabulary.english()
    assert vocab.spaced == (language == "en")
    keras.utils.set_random_seed(3)
    config = dataclasses.replace(TINY, vocab_size=vocab.size)
    net = build_model(config)
    head = next(layer for layer in reversed(net.layers) if layer.weights)
    kernel, bias = head.get_weights()
    head.set_weights([kernel * 8.0, bias - 2.0 * (np.arange(vocab.size) == 0)])  # untrained, but writes characters
    bundle = load_bundle(save_bundle(tmp_path / "model", net, config, vocab,
                                     compute_mean_std([manifest], FeatureConfig())))
    make_shards(manifest, vocab, ShardConfig(str(tmp_path / "shards"), num_shards=1), progress=False)

    def eval_fn(features, lengths):
        return bundle.model({"features": features, "feature_lengths": lengths}, training=False)

    dev_wer, dev_cer, pairs = dev.dev_scores(
        eval_fn, (str(tmp_path / "shards"),), bundle.feature_config, bundle.normalizer, bundle.vocab,
        PipelineConfig(batch_size=2, num_buckets=0), num_examples=len(utts))
    report = evaluate(EvalConfig(str(tmp_path / "model"), (str(manifest),), progress=False))
    eval_pairs = [(u["reference"], u["hypothesis"]) for u in report["utterances"]]
    assert sorted(pairs) == sorted(eval_pairs) and any(h for _, h in pairs)  # the same transcripts
    assert dev_wer == pytest.approx(report["totals"]["wer"]) and dev_cer == pytest.approx(report["totals"]["cer"])
    refs, hyps = zip(*eval_pairs)
    if language == "zh":
        assert dev_wer == dev_cer == pytest.approx(jiwer.cer([r.replace(" ", "") for r in refs], list(hyps)))
        assert report["totals"]["words"] == report["totals"]["chars"] == sum(len(r.replace(" ", "")) for r in refs)
    else:
        assert dev_wer == pytest.approx(jiwer.wer(list(refs), list(hyps)))


def _check_report(report, references):
    t = report["totals"]
    utts = report["utterances"]
    assert t["scored"] == len(utts) and [u["reference"] for u in utts] == references
    hyps = [u["hypothesis"] for u in utts]
    assert t["wer"] == pytest.approx(jiwer.wer(references, hyps))
    assert sum(u["word_errors"] for u in utts) == t["word_substitutions"] + t["word_deletions"] + t["word_insertions"]
    assert sum(u["chars"] for u in utts) == t["chars"]
    for groups in report["groups"].values():
        assert sum(g["utterances"] for g in groups.values()) == t["scored"]
        assert sum(g["words"] for g in groups.values()) == t["words"]
    tm = report["timing"]
    assert tm["audio_seconds"] > 0 and tm["rtf_total"] >= tm["rtf_acoustic"] > 0


@pytest.mark.parametrize("name", ["librispeech", "wsj", "chime4", "tedlium"])
def test_eval_on_imported_corpora(tmp_path, bundle_dir, name):
    make, prepare = {"librispeech": (corpus_fixtures.make_librispeech, librispeech.prepare_librispeech),
                     "wsj": (corpus_fixtures.make_wsj, wsj.prepare_wsj),
                     "chime4": (corpus_fixtures.make_chime4, chime4.prepare_chime4),
                     "tedlium": (corpus_fixtures.make_tedlium, tedlium.prepare_tedlium)}[name]
    fx = make(tmp_path / "corpus")
    manifests = prepare(fx.corpus_dir, tmp_path / "out", num_workers=2, **fx.prepare_kwargs)
    split = sorted(manifests)[0]
    group_by = ("environment",) if name == "chime4" else ("speaker",)
    report = evaluate(EvalConfig(str(bundle_dir), (str(tmp_path / "out" / f"{split}.jsonl"),), group_by=group_by,
                                 report_path=str(tmp_path / "report.json"), progress=False))
    utts = read_manifest(tmp_path / "out" / f"{split}.jsonl")
    _check_report(report, [" ".join(u.text.split()) for u in utts])
    assert json.loads((tmp_path / "report.json").read_text())["totals"] == report["totals"]
    if name == "chime4":
        assert set(report["groups"]["environment"]) <= {"bus", "caf", "ped", "str"}
        assert set(report["groups"]["environment"]) == {u.extra["environment"] for u in utts}
    assert "WER" in format_report(report)


def test_segments_are_cut_at_their_offset(tmp_path, bundle_dir):
    bundle = load_bundle(bundle_dir)
    wav = np.random.default_rng(0).normal(scale=0.1, size=16000 * 5).astype(np.float32)
    save_wav(tmp_path / "talk.wav", wav)
    utts = [Utterance(str(tmp_path / "talk.wav"), 1.0, "a", offset=0.0),  # a segment at 0 is not the file
            Utterance(str(tmp_path / "talk.wav"), 1.5, "b", offset=2.0),
            Utterance(str(tmp_path / "talk.wav"), 5.0, "c")]
    out = compute_log_probs(bundle, utts, progress=False)
    for u, lp in zip(utts, out.log_probs):
        assert len(lp) == output_steps(TINY, FeatureConfig(), int(round(u.duration * 16000)))
    # The segment's outputs are those of its own samples.
    alone = np.asarray(wav[32000:56000])
    save_wav(tmp_path / "seg.wav", alone)
    ref = compute_log_probs(bundle, [Utterance(str(tmp_path / "seg.wav"), 1.5, "b")], progress=False)
    np.testing.assert_allclose(out.log_probs[1], ref.log_probs[0], atol=1e-4)


def test_bad_audio_is_skipped_and_counted(tmp_path, bundle_dir):
    manifest, utts = make_manifest(tmp_path, n=3)
    (tmp_path / "broken.wav").write_bytes(b"RIFF....not audio")
    write_manifest(tmp_path / "m.jsonl", utts + [Utterance(str(tmp_path / "missing.wav"), 1.0, "gone"),
                                                 Utterance(str(tmp_path / "broken.wav"), 1.0, "broken")])
    report = evaluate(EvalConfig(str(bundle_dir), (str(tmp_path / "m.jsonl"),), progress=False))
    assert report["totals"]["scored"] == 3 and report["totals"]["skipped"] == 2
    assert [Path(s["audio_filepath"]).name for s in report["skipped"]] == ["missing.wav", "broken.wav"]
    with pytest.raises(ValueError, match="none of the 1 utterances' audio could be read"):
        write_manifest(tmp_path / "bad.jsonl", [Utterance(str(tmp_path / "missing.wav"), 1.0, "gone")])
        evaluate(EvalConfig(str(bundle_dir), (str(tmp_path / "bad.jsonl"),), progress=False))
    with pytest.raises(ValueError, match="`group_by` key 'accent' appears in no manifest line"):
        evaluate(EvalConfig(str(bundle_dir), (str(tmp_path / "m.jsonl"),), group_by=("accent",), progress=False))


def test_beam_without_lm_agrees_with_greedy_on_peaky_outputs(tmp_path, bundle_dir):
    manifest, _ = make_manifest(tmp_path, n=4)
    greedy = evaluate(EvalConfig(str(bundle_dir), (str(manifest),), progress=False))
    beam = evaluate(EvalConfig(str(bundle_dir), (str(manifest),), DecoderConfig(beam_size=32, num_workers=1),
                               progress=False))
    assert beam["decoder"]["kind"] == "beam" and beam["totals"]["scored"] == greedy["totals"]["scored"] == 4


def _cli(name, *args, cwd=None):
    return subprocess.run([str(VENV_BIN / name), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_ds2_eval_and_ds2_infer_agree(tmp_path, bundle_dir):
    manifest, utts = make_manifest(tmp_path, n=3)
    out = _cli("ds2-eval", "--model_dir", bundle_dir, "--manifest", manifest, "--report", tmp_path / "r.json",
               "--group_by", "speaker")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "WER" in out.stdout and "CER" in out.stdout and "spk0" in out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    # A stereo 44.1 kHz copy of the first clip: resampled and downmixed, it reads as the same words.
    audio = load_audio(utts[0].audio_filepath, sample_rate=44100)
    sf.write(tmp_path / "stereo.flac", np.stack([audio, audio], axis=1), 44100)
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    out = _cli("ds2-infer", "--model_dir", bundle_dir, utts[0].audio_filepath, tmp_path / "junk.wav",
               tmp_path / "stereo.flac")
    assert out.returncode == 1  # one input failed; the others were transcribed
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and "junk.wav\terror: " in lines[1]
    first = lines[0].split("\t", 1)[1]
    by_file = {Path(u["audio_filepath"]).name: u["hypothesis"] for u in report["utterances"]}
    assert first == by_file[Path(utts[0].audio_filepath).name]
    assert lines[2].startswith(str(tmp_path / "stereo.flac") + "\t") and "error" not in lines[2]
    bad = _cli("ds2-eval", "--model_dir", bundle_dir, "--manifest", tmp_path / "nope.jsonl")
    assert bad.returncode != 0
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("ds2-eval: error: ") and "nope.jsonl" in line


def _silent_wav(path, seconds, rate=16000):
    """A 16-bit mono WAV of `seconds` of silence, written sparse: a 2-hour file in an instant, on no disk blocks."""
    import struct

    data = int(seconds * rate) * 2
    header = (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, 2 * rate, 2, 16)
              + b"data" + struct.pack("<I", data))
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + data)
    return path


def test_long_recordings_are_refused_by_their_header_and_counted(tmp_path, bundle_dir, monkeypatch):
    """A 2-hour recording in an eval manifest is skipped with how to cut it, before any of it is read; the
    other utterances are scored."""
    import deepspeech2.data.manifest as manifest_module

    _, utts = make_manifest(tmp_path, n=2)
    lecture = _silent_wav(tmp_path / "lecture.wav", 7200)
    write_manifest(tmp_path / "m.jsonl", utts + [Utterance(str(lecture), 7200.0, "a long talk")])
    real = manifest_module.read_frames

    def read_frames(path, start, stop, *args, **kwargs):
        assert stop - start < 60 * 16000, f"decoded {(stop - start) / 16000:.0f} s of {path}"
        return real(path, start, stop, *args, **kwargs)

    monkeypatch.setattr(manifest_module, "read_frames", read_frames)
    report = evaluate(EvalConfig(str(bundle_dir), (str(tmp_path / "m.jsonl"),), progress=False))
    assert report["totals"]["scored"] == 2 and report["totals"]["skipped"] == 1
    [skipped] = report["skipped"]
    assert skipped["audio_filepath"] == str(lecture)
    assert "7200.0 s of audio, over the 600 s limit" in skipped["reason"]
    assert f"sox {lecture} piece.wav trim 0 30 : newfile : restart" in skipped["reason"]
    assert "1 skipped (unreadable or too long" in format_report(report)


def test_ds2_infer_and_ds2_eval_take_max_seconds(tmp_path, bundle_dir):
    manifest, utts = make_manifest(tmp_path, n=2, min_seconds=0.8, max_seconds=2.0)
    lecture = _silent_wav(tmp_path / "lecture.wav", 7200)
    out = _cli("ds2-infer", "--model_dir", bundle_dir, "--max_seconds", "60", utts[0].audio_filepath, lecture)
    assert out.returncode == 1, out.stderr[-2000:]  # one input refused, the other transcribed
    first, second = out.stdout.splitlines()
    assert first.startswith(utts[0].audio_filepath + "\t") and "error" not in first
    assert second.startswith(f"{lecture}\terror: `{lecture}`: 7200.0 s of audio, over the 60 s limit")
    assert "trim 0 30 : newfile : restart" in second
    shortest = min(u.duration for u in utts)
    out = _cli("ds2-eval", "--model_dir", bundle_dir, "--manifest", manifest, "--max_seconds", shortest + 0.01)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("1 utterances") and "1 skipped (unreadable or too long" in out.stdout


def test_ds2_eval_channel_g711_scores_what_the_phone_line_makes_of_each_file(tmp_path, bundle_dir):
    """--channel g711 decodes the telephone channel's output (here applied by hand and written out as a manifest of
    its own), reports the original files, and is not the wideband result."""
    from deepspeech2.data.telephone import telephone

    manifest, utts = make_manifest(tmp_path, n=3)
    out = _cli("ds2-eval", "--model_dir", bundle_dir, "--manifest", manifest, "--channel", "g711",
               "--report", tmp_path / "g711.json")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "over a G.711 phone line" in out.stdout.splitlines()[0]
    report = json.loads((tmp_path / "g711.json").read_text())
    assert report["channel"] == "g711" and report["totals"]["scored"] == 3
    assert [u["audio_filepath"] for u in report["utterances"]] == [u.audio_filepath for u in utts]
    by_hand = []
    for i, u in enumerate(utts):
        save_wav(tmp_path / "phone" / f"{i}.wav", telephone(load_audio(u.audio_filepath), 16000))
        by_hand.append(dataclasses.replace(u, audio_filepath=str(tmp_path / "phone" / f"{i}.wav")))
    write_manifest(tmp_path / "phone.jsonl", by_hand)
    reference = evaluate(EvalConfig(str(bundle_dir), (str(tmp_path / "phone.jsonl"),), progress=False))
    wideband = evaluate(EvalConfig(str(bundle_dir), (str(manifest),), progress=False))
    assert reference["channel"] == wideband["channel"] == "none"
    hypotheses = [u["hypothesis"] for u in report["utterances"]]
    assert hypotheses == [u["hypothesis"] for u in reference["utterances"]]
    assert hypotheses != [u["hypothesis"] for u in wideband["utterances"]]
    bad = _cli("ds2-eval", "--model_dir", bundle_dir, "--manifest", manifest, "--channel", "gsm")
    assert bad.returncode != 0
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("ds2-eval: error: ") and "--channel=gsm" in line and "g711" in line
    with pytest.raises(ValueError, match="`channel` must be one of none, g711, got 'gsm'"):
        EvalConfig(str(bundle_dir), (str(manifest),), channel="gsm")
