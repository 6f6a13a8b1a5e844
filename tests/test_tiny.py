"""The tiny synthetic corpus: layout, audio format, disjoint splits, determinism, resuming, failures, zh."""

import collections
import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deepspeech2.data.manifest import read_manifest
from deepspeech2.text import is_cjk, normalize_english
from deepspeech2_synthetic import neural, sentences, synthesis, voicebanks, voices
from deepspeech2_synthetic.sentences import exclude_held_out, load_sentences, zh_sentences
from deepspeech2_synthetic.sources import Flite, Kokoro, NeuralVoices, VoiceBanks
from deepspeech2_synthetic.tiny import TinyCorpusConfig, mix_sentences, prepare_tiny

pytestmark = pytest.mark.skipif(
    not (shutil.which("espeak-ng") and shutil.which("flite") and Path(sentences.FORTUNES_DIR, "fortunes").exists()
         and Path(sentences.FORTUNES_DIR, "tang300").exists()),
    reason="needs espeak-ng, flite, fortunes and fortunes-zh (tools/apt-deps.sh base)")

REPO = Path(__file__).resolve().parents[1]
SMALL = dict(hours=0.01, dev_minutes=0.2, test_minutes=0.2, seed=3, progress=False)  # 36 s + 12 s + 12 s
# The engines the measuring tests speak with, each loaded on its first utterance.
ENGINES = synthesis.Synthesizers("espeak-ng", shutil.which("flite"), (neural.HibariEngine(), neural.PiperEngine()))


def _config(out, **kw):
    return TinyCorpusConfig(out_dir=out, **{**SMALL, **kw})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "a"
    return out, prepare_tiny(_config(out))


@pytest.fixture(scope="module")
def manifests(corpus):
    out, _ = corpus
    return {s: read_manifest(out / f"{s}.jsonl") for s in voices.SPLITS}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_layout_and_audio_match_the_manifests(corpus, manifests):
    out, returned = corpus
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "lm_text.txt", "speakers.json"):
        assert (out / name).is_file(), name
    for split, utts in manifests.items():
        assert utts and utts == returned[split]
        for line in (out / f"{split}.jsonl").read_text().splitlines():  # stored relative to the corpus
            assert json.loads(line)["audio_filepath"].startswith(f"wav/{split}/")
        for u in utts:
            path = Path(u.audio_filepath)
            assert path.parent.name == u.speaker and path.parent.parent == out / "wav" / split
            info = sf.info(str(path))
            assert (info.format, info.subtype, info.samplerate, info.channels) == ("WAV", "PCM_16", 16000, 1)
            assert info.frames / 16000 == pytest.approx(u.duration, abs=1e-4)
            assert u.language == "en"
    # Nothing but the corpus under wav/: extra renders past the target were removed.
    listed = {Path(u.audio_filepath) for utts in manifests.values() for u in utts}
    assert set((out / "wav").rglob("*.wav")) == listed


def test_each_split_stops_at_its_target(manifests):
    for split, target in (("train", 36.0), ("dev", 12.0), ("test", 12.0)):
        durations = [u.duration for u in manifests[split]]
        assert sum(durations) >= target > sum(durations[:-1])  # the shortest prefix reaching the target


def test_splits_are_disjoint_by_speaker_and_sentence(corpus, manifests):
    out, _ = corpus
    speakers = {s: {u.speaker for u in manifests[s]} for s in voices.SPLITS}
    texts = {s: {u.text for u in manifests[s]} for s in voices.SPLITS}
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not speakers[a] & speakers[b], (a, b)
        assert not texts[a] & texts[b], (a, b)
    info = json.loads((out / "speakers.json").read_text())
    declared = {s: [sp for sp in info["splits"][s]] for s in voices.SPLITS}
    for s in voices.SPLITS:
        assert speakers[s] <= {sp["id"] for sp in declared[s]}
        assert len(declared[s]) == getattr(TinyCorpusConfig, f"{s}_speakers")
    # Held-out speakers are new voices, not just new (accent, variant) pairs: no variant or flite voice recurs.
    heard = {s: {(sp["engine"], sp["variant"] or sp["voice"]) for sp in declared[s]} for s in voices.SPLITS}
    assert not heard["train"] & heard["dev"] and not heard["train"] & heard["test"]
    assert not heard["dev"] & heard["test"]
    accents = {s: {sp["voice"] for sp in declared[s]} for s in voices.SPLITS}
    assert voices.EN_TEST_ONLY_ACCENT in accents["test"] and voices.EN_TEST_ONLY_ACCENT not in accents["train"]
    assert {"flite-slt"} == {sp["id"] for sp in declared["test"] if sp["engine"] == "flite"}
    assert not any(sp["engine"] == "flite" for sp in declared["dev"])
    assert len(declared["train"]) >= 40


def test_texts_are_normalized_sentences(manifests):
    for utts in manifests.values():
        for u in utts:
            assert re.fullmatch(r"[a-z']+( [a-z']+)*", u.text), u.text
            assert normalize_english(u.text) == u.text
            assert 3 <= len(u.text.split()) <= 15


def test_lm_text_excludes_dev_and_test(corpus, manifests):
    out, _ = corpus
    lines = (out / "lm_text.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) > 10_000 and len(set(lines)) == len(lines)
    held_out = {u.text for s in ("dev", "test") for u in manifests[s]}
    assert not held_out & set(lines)
    padded = [f" {line} " for line in lines]
    assert not any(f" {h} " in line for h in held_out for line in padded)  # not inside a longer line either
    assert {u.text for u in manifests["train"]} <= set(lines)
    assert all(re.fullmatch(r"[a-z']+( [a-z']+)*", line) for line in lines)


def test_same_seed_gives_identical_corpus(corpus, tmp_path):
    out, _ = corpus
    prepare_tiny(_config(tmp_path / "b", num_workers=1))  # a different worker count must not matter
    a, b = _tree(out), _tree(tmp_path / "b")
    assert a.keys() == b.keys()
    assert a == b  # manifests, lm_text, speakers.json and every WAV, byte for byte


def test_other_seed_gives_other_corpus(manifests, tmp_path):
    other = prepare_tiny(_config(tmp_path / "c", seed=4, hours=0.003))
    assert {u.text for u in other["train"]} != {u.text for u in manifests["train"][:len(other["train"])]}


def test_interrupted_run_resumes(corpus, tmp_path):
    src, _ = corpus
    out = tmp_path / "resume"
    shutil.copytree(src, out)
    before = _tree(out)
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "lm_text.txt", "speakers.json"):
        (out / name).unlink()
    wavs = sorted((out / "wav").rglob("*.wav"))
    deleted = wavs[::7]
    for p in deleted:
        p.unlink()
    (deleted[0].parent / f".{deleted[0].stem}.wav.tmp").write_bytes(b"half a file")  # a write cut short
    kept = {p: p.stat().st_mtime_ns for p in wavs if p not in deleted}

    prepare_tiny(_config(out))
    assert _tree(out) == before  # same manifests and audio; the stale temp file is gone
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())  # existing WAVs were reused, not rewritten


def test_failed_utterances_are_skipped_and_reported(tmp_path, monkeypatch):
    synthesize = synthesis.synthesize

    def flaky(job, engines):
        if job.split == "train" and job.index % 4 == 1:
            raise RuntimeError("synthesizer crashed")
        return synthesize(job, engines)

    monkeypatch.setattr(synthesis, "synthesize", flaky)
    result = prepare_tiny(_config(tmp_path / "flaky", hours=0.005, dev_minutes=0.05, test_minutes=0.05))
    indices = [int(Path(u.audio_filepath).stem.split("-")[0]) for u in result["train"]]
    assert indices and all(i % 4 != 1 for i in indices)
    assert sum(u.duration for u in result["train"]) >= 18.0
    stats = json.loads((tmp_path / "flaky" / "speakers.json").read_text())["stats"]
    assert stats["train"]["failed"] == sum(1 for i in range(max(indices) + 1) if i % 4 == 1) > 0
    assert "synthesizer crashed" in stats["train"]["failures"][0]
    assert stats["dev"]["failed"] == 0


def test_a_broken_synthesizer_stops_the_run(tmp_path, monkeypatch):
    def broken(job, engines):
        raise RuntimeError("no voice data")

    monkeypatch.setattr(synthesis, "synthesize", broken)
    with pytest.raises(RuntimeError, match="keeps failing.*no voice data"):
        prepare_tiny(_config(tmp_path / "broken"))


def test_mandarin_corpus(tmp_path):
    out = tmp_path / "zh"
    result = prepare_tiny(_config(out, language="zh", hours=0.005, dev_minutes=0.1, test_minutes=0.1))
    for split, utts in result.items():
        assert utts
        for u in utts:
            assert u.language == "zh" and 4 <= len(u.text) <= 20
            assert all(is_cjk(c) for c in u.text), u.text
            u.text.encode("gb2312")  # Simplified characters only
            assert sf.info(u.audio_filepath).samplerate == 16000
    speakers = {s: {u.speaker for u in utts} for s, utts in result.items()}
    assert not speakers["train"] & speakers["dev"] and not speakers["train"] & speakers["test"]
    assert not speakers["dev"] & speakers["test"]
    held_out = {u.text for s in ("dev", "test") for u in result[s]}
    lm = (out / "lm_text.txt").read_text(encoding="utf-8").splitlines()
    assert len(lm) > 10_000 and not any(h in line for h in held_out for line in lm)
    assert all(all(is_cjk(c) for c in line) for line in lm)


def test_mandarin_corpus_of_common_characters(tmp_path):
    """--common_chars 300: every transcript is made of fortunes-zh's 300 most frequent characters; the LM text
    is still all of fortunes-zh but the held-out sentences."""
    counts = collections.Counter("".join(load_sentences("zh")))
    common = {c for c, _ in counts.most_common(300)}
    out = tmp_path / "zh"
    result = prepare_tiny(_config(out, language="zh", hours=0.005, dev_minutes=0.1, test_minutes=0.1,
                                  common_chars=300))
    texts = [u.text for utts in result.values() for u in utts]
    assert texts and all(common.issuperset(t) for t in texts)
    assert len((out / "lm_text.txt").read_text(encoding="utf-8").splitlines()) > 10_000
    with pytest.raises(ValueError, match="`common_chars` .* is for Mandarin"):
        TinyCorpusConfig(out_dir="x", common_chars=300)
    with pytest.raises(ValueError, match="`common_chars` must be an int >= 0"):
        TinyCorpusConfig(out_dir="x", language="zh", common_chars=-1)


def test_sentence_extraction(tmp_path):
    (tmp_path / "fortunes").write_text(
        "Mr. Smith went to Washington.  He liked it!\n"
        "Then he went home, tired.\n"
        "\t\t-- Anonymous, \"Some Book,\n\t\tvolume two\"\n%\n"
        "See http://example.com for more details today.\n%\n"
        "The NASA people said so many times.\n%\n"
        "int main() { return 0; } is the smallest program.\n%\n"
        "He paid $5 for 3 apples on the way.\n%\n"
        "mr. Smith went to Washington.\n%\n"
        "8) Use common sense in routing cable.\n%\n"
        "_\bB_\bo_\bl_\bd text reads fine here.\n%\n"
        "Mr. Smith went to Washington.\n",
        encoding="utf-8")
    (tmp_path / "perl").write_text("Just another Perl hacker, and a good one.\n", encoding="utf-8")
    assert load_sentences("en", tmp_path) == [
        "mister smith went to washington", "he liked it", "then he went home tired",
        "he paid five dollars for three apples on the way", "bold text reads fine here"]


def test_mandarin_sentence_extraction(tmp_path):
    (tmp_path / "tang300").write_text(
        "\x1b[32m《静夜思》\x1b[m\n\x1b[33m作者：李白\x1b[m\n床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n%\n"
        "執手相看淚眼，竟無語凝噎。\n%\n"
        "用 apt install 安装软件包。\n%\n"
        "在 Debian 这种规模的项目中，很难避免遇到与你意见不和，或者难以合作\n的人。\n\n    -- Debian 《行为准则》\n",
        encoding="utf-8")
    assert load_sentences("zh", tmp_path, max_len=12) == [
        "床前明月光疑是地上霜", "举头望明月低头思故乡", "很难避免遇到与你意见不和", "或者难以合作的人"]


def test_the_plain_han_fast_path_is_normalize_mandarin():
    from deepspeech2.text import normalize_mandarin

    rng = np.random.default_rng(0)
    han = [chr(c) for c in rng.integers(0x4E00, 0xA000, 200)]
    marks = list("，。、！？；：“”‘’《》〈〉「」『』（）…—· \n")
    for _ in range(500):
        piece = "".join(rng.choice(han + marks, size=int(rng.integers(0, 30))))
        assert sentences._zh_plain(piece) == normalize_mandarin(piece)
    for other in ("二〇〇八年", "我有3个", "ＡＢ的", "abc", "①好", "℃度", "床前明月光."):  # other text: the slow path
        assert sentences._zh_plain(other) is None
    assert list(zh_sentences("床前明月光，疑是地上霜。举头望明月，低头思故乡。")) == ["床前明月光疑是地上霜",
                                                                            "举头望明月低头思故乡"]


def test_lm_text_drops_lines_containing_a_held_out_sentence():
    lines = ["i will fight no more forever", "from where the sun now stands i will fight no more forever",
             "i will fight no more", "she will fight no more", "i will fight no moreover", "hear me my chiefs",
             "the sunny side", "sun"]
    held_out = {"i will fight no more", "the sun"}
    # Whole words only: "she will ..." and "... moreover" don't contain "i will fight no more".
    assert exclude_held_out(lines, held_out, "en") == [
        "she will fight no more", "i will fight no moreover", "hear me my chiefs", "the sunny side", "sun"]
    assert exclude_held_out(["床前明月光疑是地上霜", "举头望明月", "低头思故乡"], ["明月光"], "zh") == [
        "举头望明月", "低头思故乡"]
    assert exclude_held_out([], ["x"], "en") == [] and exclude_held_out(["a b"], [], "en") == ["a b"]


def test_missing_fortunes_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="fortunes"):
        prepare_tiny(_config(tmp_path / "x", fortunes_dir=str(tmp_path / "nowhere")))


@pytest.mark.parametrize("field, value", [("language", "fr"), ("hours", 0), ("dev_minutes", -1.0),
                                          ("num_workers", 0), ("min_words", 20), ("test_speakers", 1)])
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=f"`{field}`"):
        TinyCorpusConfig(out_dir="x", **{field: value})


def test_too_many_speakers_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="`test_speakers` is too large"):
        prepare_tiny(_config(tmp_path / "x", test_speakers=200))


def test_many_training_speakers_reuse_variants_with_other_accents():
    speakers = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=300))
    train = [s for s in speakers["train"] if s.engine == "espeak-ng"]
    assert len(speakers["train"]) == 300 and len({s.id for s in speakers["train"]}) == 300
    pairs = [(s.voice, s.variant) for s in train]
    variants = {s.variant for s in train}
    assert len(set(pairs)) == len(pairs)  # every (accent, variant) pair before any repeats
    assert len(pairs) > len(variants) and len({s.voice for s in train}) > 1
    held_out = {s.variant for split in ("dev", "test") for s in speakers[split] if s.variant}
    assert not variants & held_out  # dev and test voices stay unseen
    assert len({s.word_gap for s in train}) > 1
    shared = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=300,
                                                   voices=(Flite(share=0.1),)))["train"]
    flite = [s for s in shared if s.engine == "flite"]
    assert len(shared) == 300 and len(flite) == 30 and {s.voice for s in flite} == {"kal16", "awb", "rms"}
    assert max(s.pitch for s in flite) > 1.25  # up into the female range
    assert {s.formant for s in shared} == {1.0}  # formants only when asked
    raised = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=300,
                                                                  voices=(Flite(share=0.1, formants=True),)))["train"]
    assert [s.id for s in raised] == [s.id for s in shared]
    assert [dataclasses.replace(s, formant=1.0) for s in raised] == shared  # nothing else moves
    firsts = {s.formant for s in raised if s.id in ("flite-kal16", "flite-awb", "flite-rms")}
    extras = [s.formant for s in raised if s.engine == "flite" and s.id.count("-") == 2]
    assert firsts == {1.0} and len(extras) == 27 and 1.0 <= min(extras) and max(extras) <= 1.25
    assert max(extras) - min(extras) > 0.15


def test_variant_pitch_range_reads_the_pitch_line(tmp_path):
    (tmp_path / "inverted").write_text("name Auntie\ngender female\npitch 204 176\nflutter 12\n")
    (tmp_path / "spaced").write_text("language variant\npitch  65 115\n")
    (tmp_path / "none").write_text("name x\nformant 0 88 85 154\n")
    assert voices.variant_pitch_range(tmp_path / "inverted") == -28
    assert voices.variant_pitch_range(tmp_path / "spaced") == 50
    assert voices.variant_pitch_range(tmp_path / "none") is None


def test_mandarin_leaves_out_variants_that_invert_the_tones():
    """espeak-ng's `aunty` (pitch 204 176) reverses every pitch movement: fine for English, but Mandarin's tones
    would come out inverted, so no Mandarin split has her (nor any other such variant); English keeps her."""
    folder = voices._espeak_data_dir("espeak-ng") / "voices" / "!v"
    inverted = {v for v in voices.FEMALE_VARIANTS + voices.MALE_VARIANTS
                if (folder / v).exists() and (voices.variant_pitch_range(folder / v) or 1) <= 0}
    assert "aunty" in inverted
    zh = voices.make_speakers(TinyCorpusConfig(out_dir="x", language="zh", train_speakers=200))
    used = {s.variant for split in zh.values() for s in split}
    assert not used & inverted
    assert len(used) == len(voices.FEMALE_VARIANTS + voices.MALE_VARIANTS) - len(inverted)  # every other one
    en = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=300))
    assert "aunty" in {s.variant for split in en.values() for s in split}


def test_flite_female_gives_extra_flite_speakers_a_womans_formants_and_pitch_together():
    base = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=400, voices=(Flite(share=0.2),)))
    female = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=400,
                                                         voices=(Flite(share=0.2, female=0.5),)))
    assert female["dev"] == base["dev"] and female["test"] == base["test"]
    moved = [(b, f) for b, f in zip(base["train"], female["train"]) if b != f]
    assert all(b.id == f.id for b, f in zip(base["train"], female["train"]))
    assert 25 <= len(moved) <= 55  # about half of the 77 extra flite speakers
    for b, f in moved:
        assert b.engine == "flite" and b.id not in ("flite-kal16", "flite-awb", "flite-rms")
        assert (b.gender, f.gender) == ("M", "F")
        assert 1.12 <= f.formant <= 1.25 and 1.5 <= f.pitch <= 2.1  # both raised, not one or the other
        assert dataclasses.replace(f, gender="M", formant=1.0, pitch=b.pitch) == b  # nothing else moves
    with pytest.raises(ValueError, match=r"`Flite.female` must be in \[0, 1\]"):
        Flite(female=1.5)


def test_dev_and_test_voices_do_not_depend_on_the_training_size():
    # A corpus of more hours, speakers or flite voices is compared on the same dev and test voices.
    base = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=300))
    for kw in ({"train_speakers": 600}, {"train_speakers": 300, "voices": (Flite(share=0.4),)}, {"train_speakers": 40}):
        other = voices.make_speakers(TinyCorpusConfig(out_dir="x", **kw))
        assert other["dev"] == base["dev"] and other["test"] == base["test"], kw
        assert len(other["train"]) == kw["train_speakers"]


def _duration_f0_centroid(sp: voices.Speaker) -> tuple[float, float, float]:
    """A speaker reading one sentence, measured: seconds, F0 (Hz, the pitch-gram's first ridge) and the spectral
    centroid (bins of the power spectrum)."""
    from deepspeech2.features import FeatureConfig, compute_features

    fc = FeatureConfig(pitch_bins=48)
    freqs = np.geomspace(fc.pitch_fmax, fc.pitch_fmin, fc.pitch_bins)
    job = synthesis.Job("train", 0, "the quick brown fox jumps over the lazy dog", sp, rate=1.0, pitch=sp.pitch,
                    amplitude=60, peak_dbfs=-3.0, lead=0.0, trail=0.0)
    wav, sr = synthesis.synthesize(job, ENGINES)
    wav = synthesis.trim_level_pad(wav, sr, -3.0, 0.0, 0.0)
    feats = compute_features(wav, len(wav), fc)[0].numpy()
    gram = feats[:, fc.spectral_dim:]
    voiced = gram.max(axis=1) > 0.8
    f0 = np.median([freqs[np.argmax(row > 0.8)] for row in gram[voiced]])
    power = np.exp(feats[voiced, :fc.spectral_dim]).mean(axis=0)
    return len(wav) / 16000, f0, (power * np.arange(fc.spectral_dim)).sum() / power.sum()


def test_flite_formant_shift_keeps_duration_and_pitch():
    """A formant factor k raises the spectrum k times; duration and F0 stay what was asked (measured on real
    flite output)."""
    measured = {}
    for k in (1.0, 1.2):
        sp = voices.Speaker("flite-awb-2", "flite", "awb", None, "M", rate=1.0, pitch=1.0, f0=110.0, formant=k)
        measured[k] = _duration_f0_centroid(sp)
    (d1, f1, c1), (d2, f2, c2) = measured[1.0], measured[1.2]
    assert abs(d2 / d1 - 1) < 0.03 and abs(np.log2(f2 / f1)) < 0.1  # under 1.2 semitones
    assert 1.1 < c2 / c1 < 1.3
    unshifted = synthesis.Job("train", 0, "x", dataclasses.replace(sp, formant=1.0), 1.0, 1.0, 60, -3.0, 0.0, 0.0)
    payload = [synthesis.SYNTH_VERSION, "x", {f: v for f, v in dataclasses.asdict(unshifted.speaker).items()
                                         if f not in ("formant", "intonation", "breath", "variation", "blend")},
               1.0, 1.0, 60, -3.0, 0.0, 0.0]
    assert unshifted.key() == hashlib.sha1(json.dumps(payload).encode()).hexdigest()[:10]  # old files reused


def test_hibari_speakers_move_pitch_and_formants_apart():
    """hibari's man: F0 at the asked factor with the spectrum where it was; lowered formants move the spectrum
    down with F0 unchanged; duration stays (measured on hibari's output)."""
    def measure(**kw):
        return _duration_f0_centroid(voices.Speaker("hibari-heart-1", "hibari", "heart", None, "F", rate=1.0, **kw))

    d0, f0, c0 = measure(pitch=1.0)
    d1, f1, c1 = measure(pitch=0.6)
    d2, f2, c2 = measure(pitch=1.0, formant=0.85)
    assert abs(np.log2(f1 / f0 / 0.6)) < 0.1 and abs(np.log2(f2 / f0)) < 0.1  # under 1.2 semitones
    # The centroid follows the envelope: lowered formants move it down far more than a lowered F0 does
    # (measured: 0.66 and 0.87 of the voice's own).
    assert 0.55 < c2 / c0 < 0.9 and abs(np.log(c1 / c0)) < 0.5 * abs(np.log(c2 / c0))
    assert abs(d1 / d0 - 1) < 0.02 and abs(d2 / d0 - 1) < 0.02


def test_job_parameters_depend_only_on_seed_and_index():
    sp = voices.Speaker("espeak-en-us-m1", "espeak-ng", "en-us", "m1", "M", rate=1.0, pitch=1.0)
    a = [synthesis.make_job("train", i, "hello there friend", sp, seed=0) for i in (5, 1, 3)]
    b = [synthesis.make_job("train", i, "hello there friend", sp, seed=0) for i in (1, 3, 5)]
    assert sorted(a, key=lambda j: j.index) == b
    assert synthesis.make_job("train", 1, "x", sp, seed=1) != synthesis.make_job("train", 1, "x", sp, seed=0)
    assert len({j.key() for j in b}) == 3
    assert all(0.9 <= j.rate <= 1.1 and 0.9 <= j.pitch <= 1.1 for j in b)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A corpus whose 8 training voices are 4 neural, 3 flite and 1 espeak-ng, so 36 s of audio reaches each."""
    out = tmp_path_factory.mktemp("tiny") / "mixed"
    return out, prepare_tiny(_config(out, train_speakers=8, voices=(Flite(), NeuralVoices(share=0.5))))


def test_neural_voices_are_their_share_of_training_and_in_no_other_split(mixed):
    out, manifests = mixed
    info = json.loads((out / "speakers.json").read_text())
    engines = {s: collections.Counter(sp["engine"] for sp in info["splits"][s]) for s in voices.SPLITS}
    assert engines["train"] == {"hibari": 2, "piper": 2, "flite": 3, "espeak-ng": 1}
    assert engines["dev"] == {"espeak-ng": 8, "hibari": 2, "piper": 2} and engines["test"].keys() == {"espeak-ng",
                                                                                                      "flite"}
    heard = collections.Counter(u.speaker.split("-")[0] for u in manifests["train"])
    assert heard["hibari"] >= 2 and heard["piper"] >= 2  # the neural voices speak in the corpus
    # Dev: its espeak-ng speakers up to its target, then each of those sentences again by a neural dev speaker.
    espeak = [u for u in manifests["dev"] if u.extra["engine"] == "espeak-ng"]
    again = [u for u in manifests["dev"] if u.extra["engine"] != "espeak-ng"]
    assert sum(u.duration for u in espeak) >= 12.0 > sum(u.duration for u in espeak[:-1])
    assert [u.text for u in again] == [u.text for u in espeak]
    assert [u.speaker for u in again[:4]] == ["hibari-heart-dev1", "piper-joe-dev1", "hibari-heart-dev2",
                                              "piper-joe-dev2"]
    assert not {u.speaker for u in manifests["dev"]} & {sp["id"] for sp in info["splits"]["train"]}
    # A voice is an engine's voice with its settings: no two speakers share one, within or across splits.
    settings = [json.dumps({k: v for k, v in sp.items() if k != "id"}, sort_keys=True)
                for s in voices.SPLITS for sp in info["splits"][s]]
    assert len(set(settings)) == len(settings)
    assert set(info["engines"]) == {"espeak-ng", "flite", "hibari", "piper"}
    for u in manifests["train"]:
        info_ = sf.info(u.audio_filepath)
        assert info_.samplerate == 16000 and info_.frames / 16000 == pytest.approx(u.duration, abs=1e-4)


def test_neural_corpus_is_identical_for_the_same_seed(mixed, tmp_path):
    out, _ = mixed
    prepare_tiny(_config(tmp_path / "b", train_speakers=8, voices=(Flite(), NeuralVoices(share=0.5)), num_workers=1))
    assert _tree(out) == _tree(tmp_path / "b")


def test_neural_share_of_a_large_corpus_and_its_spreads():
    speakers = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=1000,
                                                   voices=(Flite(share=0.2), NeuralVoices(share=0.3))))
    base = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=1000, voices=(Flite(share=0.2),)))
    # Dev keeps its espeak-ng speakers and gains two of each neural voice; test is unchanged.
    assert speakers["dev"][:len(base["dev"])] == base["dev"] and speakers["test"] == base["test"]
    assert [sp.id for sp in speakers["dev"][len(base["dev"]):]] == ["hibari-heart-dev1", "piper-joe-dev1",
                                                                     "hibari-heart-dev2", "piper-joe-dev2"]
    count = collections.Counter(sp.engine for sp in speakers["train"])
    assert count == {"hibari": 150, "piper": 150, "flite": 200, "espeak-ng": 500}
    hibari = [sp for sp in speakers["train"] if sp.engine == "hibari"]
    men = [sp for sp in hibari if sp.gender == "M"]
    assert 0.4 < len(men) / len(hibari) < 0.6
    assert all(sp.pitch <= 0.7 and sp.formant <= 0.92 for sp in men)
    assert all(sp.pitch >= 0.85 and sp.formant >= 0.95 for sp in hibari if sp.gender == "F")
    assert np.std([sp.intonation for sp in hibari]) > 0.2 and np.std([sp.breath for sp in hibari]) > 2
    piper = [sp for sp in speakers["train"] if sp.engine == "piper"]
    assert min(sp.formant for sp in piper) < 0.95 and max(sp.formant for sp in piper) > 1.25
    with pytest.raises(ValueError, match="`NeuralVoices.share` .* must leave room for espeak-ng voices"):
        TinyCorpusConfig(out_dir="x", voices=(Flite(share=0.5), NeuralVoices(share=0.5)))
    with pytest.raises(ValueError, match="is for English"):
        TinyCorpusConfig(out_dir="x", language="zh", voices=(NeuralVoices(share=0.2),))


def test_kokoro_speakers_are_their_share_of_training_alone_and_mix_one_gender():
    others = (Flite(), NeuralVoices(share=0.25), VoiceBanks(share=0.25))
    base = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=1000, voices=others))
    speakers = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=1000,
                                                     voices=(*others, Kokoro(share=0.1))))
    count = collections.Counter(sp.engine for sp in speakers["train"])
    assert count["kokoro"] == 100 and sum(count.values()) == 1000
    assert count["espeak-ng"] == collections.Counter(sp.engine for sp in base["train"])["espeak-ng"] - 100
    assert speakers["dev"] == base["dev"] and speakers["test"] == base["test"]  # dev and test: as they were
    kokoro = [sp for sp in speakers["train"] if sp.engine == "kokoro"]
    assert [sp.id for sp in kokoro[:2]] == ["kokoro-1", "kokoro-2"]
    for sp in kokoro:
        a, b = sp.voice.split("+")
        assert a != b and {a, b} <= set(neural.KOKORO_MEN if sp.gender == "M" else neural.KOKORO_WOMEN)
    assert 0.4 < sum(sp.gender == "M" for sp in kokoro) / len(kokoro) < 0.6
    assert min(sp.blend for sp in kokoro) < 0.1 and max(sp.blend for sp in kokoro) > 0.9
    assert len({(sp.voice, sp.blend) for sp in kokoro}) == len(kokoro)
    assert {v for sp in kokoro for v in sp.voice.split("+")} == set(neural.KOKORO_WOMEN + neural.KOKORO_MEN)
    # A speaker's job key (its WAV's name) changes with the mix.
    job = synthesis.make_job("train", 0, "a b c", kokoro[0], seed=0)
    assert job.key() != synthesis.make_job("train", 0, "a b c", dataclasses.replace(kokoro[0], blend=0.5), 0).key()
    for bad in (-0.1, 1.0, True):
        with pytest.raises(ValueError, match="`Kokoro.share` must be in"):
            Kokoro(share=bad)
    with pytest.raises(ValueError, match="`Kokoro.share` .* must leave room"):  # beside the others: no espeak-ng voice
        TinyCorpusConfig(out_dir="x", voices=(*others, Kokoro(share=0.5)))
    with pytest.raises(ValueError, match="is for English"):
        TinyCorpusConfig(out_dir="x", language="zh", voices=(Kokoro(share=0.1),))


def test_kokoro_corpus_speaks_in_training_only(tmp_path):
    """Two of six training voices Kokoro's: they read their sentences in training, at 16 kHz; dev and test have none
    of them; speakers.json names the packages, the npm tarball's included."""
    out = tmp_path / "k"
    kokoro = Kokoro(share=0.34, cache_dir=str(REPO / "data" / "downloads"))
    manifests = prepare_tiny(_config(out, train_speakers=6, voices=(Flite(), kokoro)))
    info = json.loads((out / "speakers.json").read_text())
    assert collections.Counter(sp["engine"] for sp in info["splits"]["train"]) == {"flite": 3, "kokoro": 2,
                                                                                  "espeak-ng": 1}
    assert not any(sp["engine"] == "kokoro" for s in ("dev", "test") for sp in info["splits"][s])
    spoken = [u for u in manifests["train"] if u.extra["engine"] == "kokoro"]
    assert {u.speaker for u in spoken} == {"kokoro-1", "kokoro-2"}
    for u in spoken:
        audio, sr = sf.read(u.audio_filepath)
        assert sr == 16000 and len(audio) / sr == pytest.approx(u.duration, abs=1e-4)
        assert 0.3 * len(u.text.split()) < u.duration < 2.0 * len(u.text.split())  # 0.5-3 words a second
        assert 0.05 < np.abs(audio).max() < 1.0
    assert "kokoro-js 1.2.1" in info["engines"]["kokoro"] and "cache_dir" not in info["config"]


def test_piper_variation_is_set_on_the_piper_speakers_only():
    base = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=200,
                                                 voices=(Flite(), NeuralVoices(share=0.3))))
    varied = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=200,
                                                   voices=(Flite(), NeuralVoices(share=0.3, piper_variation=0.8))))
    assert [sp.variation for sp in varied["train"] if sp.engine == "piper"] == [0.8] * 30
    assert [sp.variation for sp in varied["dev"] if sp.engine == "piper"] == [0.8] * 2  # dev's Piper speakers too
    for split in ("train", "dev"):
        assert [dataclasses.replace(sp, variation=0.0) for sp in varied[split]] == base[split]
    assert varied["test"] == base["test"]
    job = synthesis.make_job("train", 0, "a b c", next(sp for sp in base["train"] if sp.engine == "piper"), seed=0)
    assert job.key() != dataclasses.replace(job, speaker=dataclasses.replace(job.speaker, variation=0.8)).key()
    with pytest.raises(ValueError, match="`NeuralVoices.piper_variation` must be in"):
        NeuralVoices(piper_variation=-1)


@pytest.mark.skipif(bool(voicebanks.missing()), reason=f"needs {voicebanks.missing()}: {voicebanks.APT_HINT}")
def test_voice_banks_are_their_share_of_training_in_no_other_split_and_identical_per_seed(tmp_path):
    """16 training voices: 11 voice banks (each of the eleven once), 3 flite, 2 espeak-ng."""
    config = dict(train_speakers=16, voices=(Flite(), VoiceBanks(share=0.7)), hours=90 / 3600)
    manifests = prepare_tiny(_config(tmp_path / "a", **config))
    info = json.loads((tmp_path / "a" / "speakers.json").read_text())
    engines = {s: collections.Counter(sp["engine"] for sp in info["splits"][s]) for s in voices.SPLITS}
    assert engines["train"] == {"mbrola": 4, "rhvoice": 5, "pico": 2, "flite": 3, "espeak-ng": 2}
    assert engines["dev"] == {"espeak-ng": 8, "mbrola": 4, "rhvoice": 5, "pico": 2}
    assert engines["test"].keys() == {"espeak-ng", "flite"}
    for split in ("train", "dev"):
        banks = {(sp["engine"], sp["voice"]) for sp in info["splits"][split] if sp["engine"] in voicebanks.ENGINES}
        assert banks == {(e, v) for e, v, _ in voicebanks.VOICES}
    again = [u for u in manifests["dev"] if u.extra["engine"] != "espeak-ng"]
    assert [u.text for u in again] == [u.text for u in manifests["dev"] if u.extra["engine"] == "espeak-ng"]
    assert [u.speaker for u in again[:2]] == ["mbrola-us1-dev1", "rhvoice-bdl-dev1"]
    # dev's voice-bank speakers are the same people with settings no training speaker has
    settings = [json.dumps({k: v for k, v in sp.items() if k != "id"}, sort_keys=True)
                for s in voices.SPLITS for sp in info["splits"][s]]
    assert len(set(settings)) == len(settings)
    assert {"mbrola", "rhvoice", "pico"} <= set(info["engines"])
    heard = collections.Counter(u.extra["engine"] for u in manifests["train"])
    assert all(heard[e] >= 2 for e in voicebanks.ENGINES), heard  # each engine speaks in the corpus
    for u in manifests["train"]:
        assert sf.info(u.audio_filepath).samplerate == 16000
    prepare_tiny(_config(tmp_path / "b", num_workers=1, **config))
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_voice_bank_share_of_a_large_corpus_and_its_spreads():
    speakers = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=1100, voices=(
        Flite(share=0.1), NeuralVoices(share=0.2), VoiceBanks(share=0.2))))
    base = voices.make_speakers(TinyCorpusConfig(out_dir="x", train_speakers=1100, voices=(Flite(share=0.1),)))
    assert speakers["dev"][:len(base["dev"])] == base["dev"] and speakers["test"] == base["test"]
    assert len(speakers["dev"]) == len(base["dev"]) + 4 + len(voicebanks.VOICES)
    count = collections.Counter(sp.engine for sp in speakers["train"])
    assert count == {"mbrola": 80, "rhvoice": 100, "pico": 40, "hibari": 110, "piper": 110, "flite": 110,
                     "espeak-ng": 550}
    banks = [sp for sp in speakers["train"] if sp.engine in voicebanks.ENGINES]
    born = {(e, v): g for e, v, g in voicebanks.VOICES}
    crossed = [sp for sp in banks if sp.gender != born[sp.engine, sp.voice]]
    assert 0.2 < len(crossed) / len(banks) < 0.4
    assert all(sp.pitch >= 1.45 and sp.formant >= 1.1 for sp in crossed if sp.gender == "F")
    assert all(sp.pitch <= 0.7 and sp.formant <= 0.92 for sp in crossed if sp.gender == "M")
    kept = [sp for sp in banks if sp not in crossed]
    assert all(0.92 <= sp.formant <= 1.08 for sp in kept) and np.std([sp.rate for sp in banks]) > 0.05
    with pytest.raises(ValueError, match=r"`VoiceBanks.share` \(0.4\) must leave room .* \(0.6 together\)"):
        TinyCorpusConfig(out_dir="x", voices=(Flite(share=0.3), NeuralVoices(share=0.3), VoiceBanks(share=0.4)))
    with pytest.raises(ValueError, match="`VoiceBanks.share` .* is for English"):
        TinyCorpusConfig(out_dir="x", language="zh", voices=(VoiceBanks(share=0.2),))
    with pytest.raises(ValueError, match="more than one VoiceBanks"):
        TinyCorpusConfig(out_dir="x", voices=(VoiceBanks(share=0.1), VoiceBanks(share=0.2)))
    with pytest.raises(ValueError, match="`voices` holds 'espeak'"):
        TinyCorpusConfig(out_dir="x", voices=("espeak",))


def test_mix_sentences_keeps_the_share_in_every_prefix_until_one_runs_out():
    first, second = [f"f{i}" for i in range(30)], [f"s{i}" for i in range(100)]
    for share in (0.0, 0.25, 0.5, 0.7):
        mixed = mix_sentences(first, second, share)
        taken = [m for m in mixed if m.startswith("s")]
        assert taken == second[:len(taken)]
        assert [m for m in mixed if m.startswith("f")] == first[:len(mixed) - len(taken)]
        for n in range(1, len(mixed) + 1):  # every prefix holds `share` of `second`'s, to within one
            assert abs(sum(m.startswith("s") for m in mixed[:n]) - share * n) < 1
        assert len(mixed) == (30 if share == 0 else int(30 / (1 - share)))  # `first` runs out first here
    assert len(mix_sentences(first, second[:5], 0.5)) == 10  # now `second` does


def test_train_text_gives_its_share_of_training_sentences_and_never_a_held_out_one(corpus, manifests, tmp_path):
    out, _ = corpus
    dev = manifests["dev"][0].text
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima".split()
    own = [" ".join(words[i:i + 4] + [words[j]]) for i in range(8) for j in range(12)]
    text = tmp_path / "more.txt"
    text.write_text("\n".join(own + [f"kilo {dev} lima", "too short", " ".join(words * 2)]) + "\n", encoding="utf-8")
    shutil.copytree(out, tmp_path / "t")  # dev's and test's WAVs are reused
    mixed = prepare_tiny(_config(tmp_path / "t", train_text=str(text), train_text_share=0.5))
    for split in ("dev", "test"):  # held-out splits are fortunes, as without train_text
        assert (tmp_path / "t" / f"{split}.jsonl").read_bytes() == (out / f"{split}.jsonl").read_bytes()
    train = [u.text for u in mixed["train"]]
    assert len(train) >= 8
    assert [t in own for t in train] == [i % 2 == 1 for i in range(len(train))]  # every second sentence
    assert len(set(train)) == len(train)
    held_out = {u.text for s in ("dev", "test") for u in manifests[s]}
    assert not any(f" {h} " in f" {t} " for h in held_out for t in train)

    shouted = tmp_path / "shouted.txt"  # lines as a user may have them: normalized as the transcripts are
    shouted.write_text("\n".join(f"Press ONE for {w.title()}, then 2!" for w in words) + "\n", encoding="utf-8")
    shutil.copytree(out, tmp_path / "s")
    texts = [u.text for u in prepare_tiny(_config(tmp_path / "s", train_text=str(shouted),
                                                  train_text_share=0.5))["train"]]
    assert len(texts) >= 8 and set(texts[1::2]) <= {f"press one for {w} then two" for w in words}


@pytest.mark.parametrize("kw, match", [(dict(train_text_share=0.5), "go together"),
                                       (dict(train_text="x.txt"), "go together"),
                                       (dict(train_text="x.txt", train_text_share=1.0), r"\[0, 1\)"),
                                       (dict(train_text="x.txt", train_text_share=0.5, language="zh"), "English")])
def test_train_text_config_rejects_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        TinyCorpusConfig(out_dir="x", **kw)


def test_unreadable_or_empty_train_text_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="missing.txt.*cannot be read.*ds2-prepare english"):
        prepare_tiny(_config(tmp_path / "a", train_text=str(tmp_path / "missing.txt"), train_text_share=0.5))
    (tmp_path / "short.txt").write_text("two words\n", encoding="utf-8")
    with pytest.raises(ValueError, match="short.txt.*no sentence of 3-15 words"):
        prepare_tiny(_config(tmp_path / "b", train_text=str(tmp_path / "short.txt"), train_text_share=0.5))
