import os
import subprocess
import sys

import numpy as np
import soundfile as sf

from deepspeech2.audio import save_wav
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.data.shards import ShardConfig, load_index, make_shards, read_shards, shard_paths
from deepspeech2.testing import make_clip, make_manifest
from deepspeech2.vocab import Vocabulary


def _records(shard_dir):
    return {r["id"].numpy().decode(): r for r in read_shards(shard_paths(shard_dir))}


def test_roundtrip_is_bit_exact(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=6)
    vocab = Vocabulary.english()
    index = make_shards(manifest, vocab, ShardConfig(str(tmp_path / "shards"), num_shards=3), progress=False)
    assert index["total_count"] == 6 and len(index["shards"]) == 3
    assert sum(s["count"] for s in index["shards"]) == 6
    assert abs(index["total_duration"] - sum(u.duration for u in utts)) < 1e-2
    records = _records(tmp_path / "shards")
    for u in utts:
        r = records[os.path.splitext(os.path.basename(u.audio_filepath))[0]]
        pcm, sr = sf.read(u.audio_filepath, dtype="int16")
        np.testing.assert_array_equal(r["pcm"].numpy(), pcm)  # bit-exact audio
        np.testing.assert_array_equal(r["audio"].numpy(), pcm.astype(np.float32) / 32768)
        assert r["labels"].numpy().tolist() == vocab.encode(u.text)
        assert r["text"].numpy().decode() == u.text
        assert int(r["num_samples"]) == len(pcm) and int(r["sample_rate"]) == sr == 16000
        assert abs(float(r["duration"]) - len(pcm) / sr) < 1e-6


def test_offsets_resampling_and_bad_utterances(tmp_path):
    wav = make_clip(3.0)
    save_wav(tmp_path / "long.wav", wav)
    sf.write(tmp_path / "hi.flac", make_clip(1.0, sample_rate=44100), 44100)
    (tmp_path / "corrupt.wav").write_bytes(b"garbage")
    utts = [Utterance(str(tmp_path / "long.wav"), 1.0, "segment", offset=1.0),
            Utterance(str(tmp_path / "hi.flac"), 1.0, "resampled"),
            Utterance(str(tmp_path / "corrupt.wav"), 1.0, "broken"),
            Utterance(str(tmp_path / "long.wav"), 3.0, "bad #text"),
            Utterance(str(tmp_path / "missing.wav"), 1.0, "missing")]
    write_manifest(tmp_path / "m.jsonl", utts)
    index = make_shards(tmp_path / "m.jsonl", Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2),
                        progress=False)
    assert index["total_count"] == 2 and len(index["skipped"]) == 3
    reasons = " ".join(s["reason"] for s in index["skipped"])
    assert "could not be read" in reasons and "outside the vocabulary" in reasons and "does not exist" in reasons
    records = _records(tmp_path / "s")
    seg = records["long@1.00"]["pcm"].numpy()
    full, _ = sf.read(tmp_path / "long.wav", dtype="int16")
    np.testing.assert_array_equal(seg, full[16000:32000])  # the offset segment is cut out exactly
    assert records["hi"]["num_samples"] == 16000


def test_rerun_is_a_noop_and_no_temp_files_left(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=3)
    cfg = ShardConfig(str(tmp_path / "s"), num_shards=2)
    make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "s").iterdir()}
    make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "s").iterdir()} == mtimes
    assert not [p for p in mtimes if p.name.startswith(".")]


def test_crash_leaves_no_half_shard(tmp_path, monkeypatch):
    manifest, _ = make_manifest(tmp_path, n=4)
    import deepspeech2.data.shards as shards

    calls = {"n": 0}
    real = shards.encode_example

    def boom(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated crash")
        return real(*a, **k)

    monkeypatch.setattr(shards, "encode_example", boom)
    try:
        make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=1), progress=False)
    except RuntimeError:
        pass
    assert not list((tmp_path / "s").iterdir())  # neither a partial shard, a temp file, nor an index


def test_cli(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=3)
    Vocabulary.english().save(tmp_path / "vocab.txt")
    out = subprocess.run([sys.executable, "bin/ds2_make_shards.py", "--manifest", str(manifest), "--vocab",
                          str(tmp_path / "vocab.txt"), "--out", str(tmp_path / "s"), "--num_shards", "2"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert load_index(tmp_path / "s")["total_count"] == 3
    bad = subprocess.run([sys.executable, "bin/ds2_make_shards.py", "--manifest", str(manifest), "--vocab",
                          str(tmp_path / "nope.txt"), "--out", str(tmp_path / "s2")], capture_output=True, text=True)
    # One readable line, last (TensorFlow's own import-time log lines may come before it).
    assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1] == (
        f"ds2-make-shards: error: vocabulary file `{tmp_path / 'nope.txt'}` does not exist; "
        "build it with ds2-build-vocab")


def test_build_vocab_cli(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=8)
    out = subprocess.run([sys.executable, "bin/ds2_build_vocab.py", "--manifest_paths", str(manifest),
                          "--out", str(tmp_path / "v.txt")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    v = Vocabulary.load(tmp_path / "v.txt")
    assert set(v.chars) == set("".join(u.text for u in utts)) and v.chars[:2] == (" ", "'")


def test_shards_sorted_by_duration_with_percentiles(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=10, min_seconds=0.5, max_seconds=3.0)
    index = make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2),
                        progress=False)
    for path in shard_paths(tmp_path / "s"):
        durations = [float(r["duration"]) for r in read_shards([path])]
        assert durations == sorted(durations)
    q = index["duration_percentiles"]
    assert len(q) == 21 and q == sorted(q)
    assert abs(q[0] - min(u.duration for u in utts)) < 1e-3 and abs(q[-1] - max(u.duration for u in utts)) < 1e-3
