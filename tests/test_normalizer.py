import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepspeech2.audio import load_audio, save_wav
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.features import FeatureConfig, Normalizer, compute_features
from deepspeech2.prepare.stats import compute_mean_std

SR = 16000
REPO = Path(__file__).resolve().parents[1]


def _clip(seconds, seed, amp):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    return amp * np.sin(2 * np.pi * (200 + 300 * seed) * t) + 0.3 * amp * rng.standard_normal(len(t))


@pytest.fixture
def corpus(tmp_path):
    """4 clips; the last is a segment (offset 1 s, 0.5 s long) of a file whose first second is loud."""
    utts = []
    for i, (sec, amp) in enumerate([(1.0, 0.5), (0.7, 0.1), (1.3, 0.3)]):
        path = tmp_path / "wav" / f"u{i}.wav"
        save_wav(path, _clip(sec, i, amp))
        utts.append(Utterance(str(path), sec, "a b"))
    long = np.concatenate([_clip(1.0, 7, 0.9), _clip(1.0, 8, 0.02)])
    save_wav(tmp_path / "wav" / "long.wav", long)
    utts.append(Utterance(str(tmp_path / "wav" / "long.wav"), 0.5, "c", offset=1.0))
    manifest = tmp_path / "train.jsonl"
    write_manifest(manifest, utts)
    return manifest, utts


def _reference_frames(utts, cfg):
    """Valid frames of every utterance, computed one at a time: (total_frames, dim)."""
    out = []
    for u in utts:
        wav = load_audio(u.audio_filepath, offset=u.offset, duration=u.duration)
        feats, n = compute_features(wav, len(wav), cfg)
        out.append(feats.numpy()[: int(n)])
    return np.concatenate(out).astype(np.float64)


@pytest.mark.parametrize("kind", ["linear", "mfcc"])
def test_stats_match_numpy_and_normalize(corpus, kind):
    manifest, utts = corpus
    cfg = FeatureConfig(kind=kind, n_mfcc=13, n_mels=26, mfcc_context=1)
    norm = compute_mean_std([manifest], cfg, num_samples=None, batch_size=3)  # 2 batches, padded
    frames = _reference_frames(utts, cfg)
    assert (norm.num_utterances, norm.num_frames, norm.num_skipped) == (4, len(frames), 0)
    np.testing.assert_allclose(norm.mean, frames.mean(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(norm.std, frames.std(0), rtol=1e-4, atol=1e-4)

    # Normalized valid frames: zero mean, unit std; padding frames stay zero.
    padded = np.concatenate([frames, np.full((5, cfg.dim), 7.0)])[None]
    z = norm.apply(padded, [len(frames)]).numpy()[0]
    np.testing.assert_allclose(z[: len(frames)].mean(0), 0.0, atol=1e-3)
    np.testing.assert_allclose(z[: len(frames)].std(0), 1.0, atol=1e-3)
    assert not z[len(frames):].any()


def test_offset_and_duration_respected(corpus):
    manifest, utts = corpus
    cfg = FeatureConfig()
    seg_only = _reference_frames(utts[3:], cfg)
    whole = compute_features(load_audio(utts[3].audio_filepath), 2 * SR, cfg)[0].numpy()
    write_manifest(manifest.parent / "seg.jsonl", utts[3:])
    norm = compute_mean_std([manifest.parent / "seg.jsonl"], cfg)
    assert norm.num_frames == len(seg_only) == 49
    np.testing.assert_allclose(norm.mean, seg_only.mean(0), rtol=1e-4, atol=1e-4)
    assert np.abs(norm.mean - whole.mean(0)).max() > 1.0  # the loud first second was not read


def test_sampling_is_seeded(corpus):
    manifest, _ = corpus
    a = compute_mean_std([manifest], FeatureConfig(), num_samples=2, seed=3)
    b = compute_mean_std([manifest, manifest], FeatureConfig(), num_samples=100, seed=3)
    assert a.num_utterances == 2 and b.num_utterances == 8  # more samples than utterances = all
    np.testing.assert_array_equal(a.mean, compute_mean_std([manifest], FeatureConfig(), num_samples=2, seed=3).mean)
    with pytest.raises(ValueError, match="num_samples"):
        compute_mean_std([manifest], FeatureConfig(), num_samples=0)


def test_bad_audio_is_skipped_and_counted(corpus, tmp_path):
    manifest, utts = corpus
    (tmp_path / "corrupt.wav").write_bytes(b"RIFF\x00\x00not really a wav file")
    save_wav(tmp_path / "tiny.wav", np.zeros(100))  # shorter than one window
    bad = [Utterance(str(tmp_path / "corrupt.wav"), 1.0, "x"), Utterance(str(tmp_path / "missing.wav"), 1.0, "x"),
           Utterance(str(utts[0].audio_filepath), 5.0, "x", offset=3.0), Utterance(str(tmp_path / "tiny.wav"), 0.0, "x")]
    write_manifest(tmp_path / "mixed.jsonl", utts + bad)
    norm = compute_mean_std([tmp_path / "mixed.jsonl"], FeatureConfig(), num_samples=None)
    clean = compute_mean_std([manifest], FeatureConfig(), num_samples=None)
    assert (norm.num_utterances, norm.num_skipped) == (4, 4)
    np.testing.assert_allclose(norm.mean, clean.mean, rtol=1e-6)
    write_manifest(tmp_path / "allbad.jsonl", bad)
    with pytest.raises(ValueError, match="no usable audio"):
        compute_mean_std([tmp_path / "allbad.jsonl"], FeatureConfig())
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        compute_mean_std([tmp_path / "nope.jsonl"], FeatureConfig())


def test_utterances_over_max_duration_are_skipped_unread(corpus, monkeypatch):
    """Longer than training keeps: skipped and counted by the header alone, never decoded (a 2-hour file
    would otherwise be padded into a batch of 16)."""
    import deepspeech2.data.manifest as manifest_module
    from deepspeech2.data.pipeline import PipelineConfig

    manifest, utts = corpus
    real, read = manifest_module.read_frames, []
    monkeypatch.setattr(manifest_module, "read_frames", lambda path, *a, **k: read.append(str(path)) or real(path, *a, **k))
    norm = compute_mean_std([manifest], FeatureConfig(), num_samples=None, max_duration=1.1)
    clean = compute_mean_std([manifest], FeatureConfig(), num_samples=None)
    assert (norm.num_utterances, norm.num_skipped) == (3, 1) and (clean.num_utterances, clean.num_skipped) == (4, 0)
    assert read.count(utts[2].audio_filepath) == 1  # by the uncapped run only: the 1.3 s clip
    assert 0 < norm.num_frames < clean.num_frames
    import inspect
    assert inspect.signature(compute_mean_std).parameters["max_duration"].default == PipelineConfig().max_duration


def test_save_load_round_trip(tmp_path):
    cfg = FeatureConfig(kind="logmel", n_mels=40, mel_fmax=7600.0)
    rng = np.random.default_rng(0)
    norm = Normalizer(rng.standard_normal(40), rng.uniform(0.5, 2, 40), cfg, num_utterances=3, num_frames=300,
                      num_skipped=1)
    norm.save(tmp_path / "stats" / "mean_std.npz")
    assert [p.name for p in (tmp_path / "stats").iterdir()] == ["mean_std.npz"]  # no temp file left over
    back = Normalizer.load(tmp_path / "stats" / "mean_std.npz")
    assert back.feature_config == cfg and back.mean.dtype == np.float32
    np.testing.assert_array_equal(back.mean, norm.mean)
    np.testing.assert_array_equal(back.std, norm.std)
    assert (back.num_utterances, back.num_frames, back.num_skipped) == (3, 300, 1)

    with pytest.raises(FileNotFoundError, match="absent.npz"):
        Normalizer.load(tmp_path / "absent.npz")
    (tmp_path / "junk.npz").write_text("hello")
    with pytest.raises(ValueError, match="junk.npz"):
        Normalizer.load(tmp_path / "junk.npz")
    with pytest.raises(ValueError, match="mean"):
        Normalizer(np.zeros(39), np.ones(40), cfg)


def test_apply_floors_std_and_single_utterance():
    norm = Normalizer(np.full(161, 2.0), np.r_[np.zeros(1), np.full(160, 4.0)], FeatureConfig())
    x = np.full((3, 161), 6.0, np.float32)
    z = norm.apply(x, 2).numpy()  # (frames, dim) with a scalar length
    assert z.shape == (3, 161) and not z[2].any()
    np.testing.assert_allclose(z[:2, 1:], 1.0)
    np.testing.assert_allclose(z[:2, 0], 4.0 / 1e-3, rtol=1e-5)  # std 0 floored, not a division by zero


def _cli(*args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, str(REPO / "bin" / "ds2_compute_stats.py"), *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def test_cli(corpus, tmp_path):
    manifest, utts = corpus
    out = tmp_path / "out" / "mean_std.npz"
    r = _cli("--manifest_paths", f"{manifest},{manifest}", "--feature", "logmel", "--n_mels", "40",
             "--num_samples", "0", "--out", out)
    assert r.returncode == 0, r.stderr
    norm = Normalizer.load(out)
    assert norm.feature_config == FeatureConfig(kind="logmel", n_mels=40) and norm.num_utterances == 8
    assert "wrote" in r.stdout

    # --eps (the features' floor) reaches the stats and travels in their FeatureConfig
    r = _cli("--manifest_paths", manifest, "--feature", "logmel", "--n_mels", "40", "--num_samples", "0",
             "--eps", "1.0", "--out", tmp_path / "floored.npz")
    assert r.returncode == 0, r.stderr
    floored = Normalizer.load(tmp_path / "floored.npz")
    cfg = FeatureConfig(kind="logmel", n_mels=40, eps=1.0)
    assert floored.feature_config == cfg
    ref = _reference_frames(utts, cfg)
    np.testing.assert_allclose(floored.mean, ref.mean(0), rtol=1e-4, atol=1e-4)
    assert np.abs(floored.mean - norm.mean).max() > 0.1  # the floor matters for these clips

    r = _cli("--manifest_paths", tmp_path / "missing.jsonl", "--out", tmp_path / "x.npz")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if "ds2-compute-stats: error:" in line]
    assert len(errors) == 1 and "missing.jsonl" in errors[0] and r.stderr.strip().endswith(errors[0])
    assert not (tmp_path / "x.npz").exists()
