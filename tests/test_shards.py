import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from deepspeech2.audio import from_pcm16, load_audio, save_wav, speech_like_clip, to_pcm16
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.data.shards import ShardConfig, load_index, make_shards, read_shards, shard_paths
from deepspeech2.model_config import ModelConfig
from deepspeech2.vocab import Vocabulary

from factories import make_manifest


def _written(folder):
    """What a run left in `folder`, but the lock file it holds while it runs (`fileio.exclusive_lock`)."""
    return [p for p in folder.iterdir() if p.name != ".lock"]


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


def test_one_int16_scale_everywhere(tmp_path):
    """Float <-> int16 at 2^15 (soundfile's reading): a 16-bit file read and written back, by save_wav or into a
    shard, is the same samples; floats beyond int16's range clip."""
    pcm = np.array([-32768, -32767, -1, 0, 1, 16384, 32766, 32767], np.int16)
    sf.write(tmp_path / "a.wav", pcm, 16000, subtype="PCM_16")
    wav = load_audio(tmp_path / "a.wav")
    np.testing.assert_array_equal(wav, pcm / 32768.0)
    np.testing.assert_array_equal(from_pcm16(pcm), wav)
    np.testing.assert_array_equal(from_pcm16(pcm.astype("<i2").tobytes()), wav)
    np.testing.assert_array_equal(to_pcm16(wav), pcm)
    save_wav(tmp_path / "b.wav", wav)
    np.testing.assert_array_equal(sf.read(tmp_path / "b.wav", dtype="int16")[0], pcm)
    np.testing.assert_array_equal(to_pcm16([-1.5, -1.0, 1.0, 2.0, np.float32(0.4999 / 32768)]),
                                  [-32768, -32768, 32767, 32767, 0])


def test_offsets_resampling_and_bad_utterances(tmp_path):
    wav = speech_like_clip(3.0)
    save_wav(tmp_path / "long.wav", wav)
    sf.write(tmp_path / "hi.flac", speech_like_clip(1.0, sample_rate=44100), 44100)
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
    mtimes = {p: p.stat().st_mtime_ns for p in _written(tmp_path / "s")}
    make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    assert {p: p.stat().st_mtime_ns for p in _written(tmp_path / "s")} == mtimes
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
    assert not _written(tmp_path / "s")  # neither a partial shard, a temp file, nor an index


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


def test_a_second_run_on_the_same_folder_is_refused_while_the_first_runs(tmp_path):
    """Two runs writing one folder would leave an index that doesn't match its shards: the second stops at once."""
    from deepspeech2.fileio import exclusive_lock

    manifest, _ = make_manifest(tmp_path, n=2)
    out = tmp_path / "s"
    with exclusive_lock(out, "the first ds2-make-shards"):  # a run in progress: the kernel's lock on out/.lock
        with pytest.raises(ValueError) as e:  # the CLI prints it as its one error line
            make_shards(manifest, Vocabulary.english(), ShardConfig(str(out), num_shards=2), progress=False)
        assert str(e.value) == (f"`{out}` is in use by PID {os.getpid()} (a ds2-make-shards there is still running); "
                                "wait for it to finish, or use another folder")
        assert not list(out.glob("shard-*")) and not (out / "index.json").exists()
    assert make_shards(manifest, Vocabulary.english(), ShardConfig(str(out), num_shards=2),
                       progress=False)["total_count"] == 2  # the lock goes with its holder


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


def test_malformed_lines_are_skipped_with_their_line_numbers(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=4)
    good = manifest.read_text().splitlines()
    lines = [good[0], "{oops", good[1], "", json.dumps({"audio_filepath": "wav/utt002.wav", "duration": 1.0}),
             good[2], json.dumps({"audio_filepath": "wav/utt003.wav", "duration": -1, "text": "hello"}), good[3],
             json.dumps({"audio_filepath": "wav/missing.wav", "duration": 1.0, "text": "gone"})]
    manifest.write_text("\n".join(lines) + "\n")
    index = make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2),
                        progress=False)
    assert index["total_count"] == 4
    skipped = {s["line"]: s for s in index["skipped"]}
    assert sorted(skipped) == [2, 5, 7, 9]  # line 4 is blank: neither an utterance nor a problem
    assert {n: skipped[n]["kind"] for n in skipped} == {2: "malformed", 5: "malformed", 7: "malformed",
                                                        9: "unusable"}
    assert "not valid JSON" in skipped[2]["reason"] and "text" in skipped[5]["reason"]
    assert "`duration`" in skipped[7]["reason"] and "does not exist" in skipped[9]["reason"]
    assert not skipped[2]["reason"].startswith("line")  # the line number is its own field
    assert sorted(_records(tmp_path / "s")) == [f"utt{i:03d}" for i in range(4)]


def test_non_finite_and_non_utf8_lines_are_skipped_as_malformed(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=3)
    good = manifest.read_bytes().splitlines()
    bad = [b'{"audio_filepath": "wav/utt000.wav", "duration": NaN, "text": "hello world"}',  # line 2
           b'{"audio_filepath": "wav/utt001.wav", "duration": 1, "offset": Infinity, "text": "hello"}',  # 3
           '{"audio_filepath": "wav/utt001.wav", "duration": 1.0, "text": "caf\u00e9"}'.encode("latin-1")]  # 4
    manifest.write_bytes(b"\n".join(good[:1] + bad + good[1:]) + b"\n")
    index = make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2),
                        progress=False)
    assert index["total_count"] == 3
    skipped = {s["line"]: s for s in index["skipped"]}
    assert sorted(skipped) == [2, 3, 4] and {s["kind"] for s in skipped.values()} == {"malformed"}
    assert "`duration` must be a non-negative, finite" in skipped[2]["reason"]
    assert "`offset` must be a non-negative, finite" in skipped[3]["reason"]
    assert "not valid UTF-8 (byte 0xe9" in skipped[4]["reason"]
    assert sorted(_records(tmp_path / "s")) == [f"utt{i:03d}" for i in range(3)]


def test_index_lists_samples_and_label_steps_per_record(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=6)
    vocab = Vocabulary.english()
    index = make_shards(manifest, vocab, ShardConfig(str(tmp_path / "s"), num_shards=2), progress=False)
    for entry, path in zip(index["shards"], shard_paths(tmp_path / "s")):
        records = list(read_shards([path]))
        assert entry["num_samples"] == [int(r["num_samples"]) for r in records]
        # The shortest CTC path of the label ids, brute force: a blank between equal neighbours.
        expected = []
        for r in records:
            ids = r["labels"].numpy().tolist()
            expected.append(len(ids) + sum(a == b for a, b in zip(ids, ids[1:])))
        assert entry["label_steps"] == expected
        assert entry["durations"] == [round(int(r["num_samples"]) / 16000, 3) for r in records]


def test_model_skips_utterances_ctc_cannot_fit(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=8, min_seconds=0.4, max_seconds=2.0)
    vocab = Vocabulary.english()
    # Time stride 12: ((frames - 3) // 12 + 1) steps; the reference below spells it out.
    wide = ModelConfig(conv_filters=(4,), conv_kernel_sizes=((3, 3),), conv_strides=((12, 2),), rnn_layers=1,
                       rnn_units=8)

    def fits(u):
        samples = sf.info(u.audio_filepath).frames
        steps = max(0, (1 + (samples - 320) // 160 - 3) // 12 + 1)
        ids = vocab.encode(u.text)
        return steps >= len(ids) + sum(a == b for a, b in zip(ids, ids[1:]))

    plain = make_shards(manifest, vocab, ShardConfig(str(tmp_path / "s"), num_shards=2), progress=False)
    assert plain["total_count"] == 8 and plain["model"] is None
    index = make_shards(manifest, vocab, ShardConfig(str(tmp_path / "s"), num_shards=2, model=wide),
                        progress=False)  # same folder: the model is part of the fingerprint, so it is rewritten
    infeasible = [s for s in index["skipped"] if s["kind"] == "infeasible"]
    assert 0 < len(infeasible) < 8 and index["total_count"] == 8 - len(infeasible)
    assert {s["line"] for s in infeasible} == {n for n, u in enumerate(utts, start=1) if not fits(u)}
    assert all("CTC-infeasible" in s["reason"] and "time stride 12" in s["reason"] for s in infeasible)
    assert sorted(_records(tmp_path / "s")) == sorted(os.path.basename(u.audio_filepath)[:-4] for u in utts
                                                      if fits(u))
    assert ModelConfig.from_dict(index["model"]) == wide


def test_older_index_is_rewritten(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=2)
    cfg = ShardConfig(str(tmp_path / "s"), num_shards=1)
    index = make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    # An index from before per-record samples: same manifest and settings, another format's fingerprint.
    old = {k: v for k, v in index.items() if k != "format"}
    old["fingerprint"] = "written-by-format-1"
    for s in old["shards"]:
        del s["num_samples"]
    (tmp_path / "s" / "index.json").write_text(json.dumps(old))
    again = make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    assert again["format"] == 2 and "num_samples" in again["shards"][0]
    assert load_index(tmp_path / "s") == again


def test_cli_summary_counts_skipped_lines(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=3)
    manifest.write_text(manifest.read_text() + "not json\n")
    Vocabulary.english().save(tmp_path / "vocab.txt")
    out = subprocess.run([sys.executable, "bin/ds2_make_shards.py", "--manifest", str(manifest), "--vocab",
                          str(tmp_path / "vocab.txt"), "--out", str(tmp_path / "s"), "--num_shards", "2",
                          "--model", "ds2-small"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "3 utterances" in out.stdout and "1 skipped (1 malformed manifest lines" in out.stdout
    index = load_index(tmp_path / "s")
    assert index["skipped"] == [{"line": 4, "kind": "malformed", "reason": index["skipped"][0]["reason"]}]
    assert index["model"] is not None


def test_no_utterance_written_is_an_error_and_the_index_says_why(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=2)
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    for line in lines:
        line["text"] = line["text"].upper()  # out of the vocabulary: every line is unusable
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines) + "{oops\n")
    cfg = ShardConfig(str(tmp_path / "s"), num_shards=2)
    with pytest.raises(ValueError, match=r"none of the 3 lines of .* could be written \(2 unusable, 1 malformed; "
                                         r"line 1: .*outside the vocabulary.*index.json"):
        make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    index = load_index(tmp_path / "s")  # written all the same, with every line's reason
    assert index["total_count"] == 0 and [s["line"] for s in index["skipped"]] == [1, 2, 3]
    with pytest.raises(ValueError, match="none of the 3 lines"):  # a re-run says so again
        make_shards(manifest, Vocabulary.english(), cfg, progress=False)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="has no lines"):
        make_shards(tmp_path / "empty.jsonl", Vocabulary.english(), ShardConfig(str(tmp_path / "e")), progress=False)

    Vocabulary.english().save(tmp_path / "vocab.txt")
    out = subprocess.run([sys.executable, "bin/ds2_make_shards.py", "--manifest", str(manifest), "--vocab",
                          str(tmp_path / "vocab.txt"), "--out", str(tmp_path / "s2")], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("ds2-make-shards: error: none of the 3 lines of")


def test_a_failed_rerun_leaves_a_folder_training_refuses(tmp_path, monkeypatch):
    """A re-run killed on its k-th record has replaced shards 0..i, not the rest: the old index must not survive
    to describe them. Training (the index, then the pipeline) refuses the folder, naming it and the fix."""
    import re
    import threading

    from deepspeech2.data.pipeline import ShardSet, make_dataset
    import deepspeech2.data.shards as shards
    from deepspeech2.features import FeatureConfig

    manifest, _ = make_manifest(tmp_path, n=8)
    out = tmp_path / "s"
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(out), num_shards=4), progress=False)
    old = {p.name: p.read_bytes() for p in out.glob("shard-*")}
    calls, lock, real = [], threading.Lock(), shards._load

    def killed_on_the_fifth(*args):
        with lock:
            calls.append(None)
            n = len(calls)
        if n == 5:  # the first record of shard 2: shards 0 and 1 are rewritten by then
            raise RuntimeError("killed")
        return real(*args)

    monkeypatch.setattr(shards, "_load", killed_on_the_fifth)
    with pytest.raises(RuntimeError, match="killed"):  # another seed: another order, so a rewrite
        make_shards(manifest, Vocabulary.english(), ShardConfig(str(out), num_shards=4, seed=1), progress=False)
    monkeypatch.undo()
    now = {p.name: p.read_bytes() for p in out.glob("shard-*")}
    assert sorted(now) == sorted(old) and [now[n] != old[n] for n in sorted(old)] == [True, True, False, False]
    assert not (out / "index.json").exists() and not [p for p in _written(out) if p.name.startswith(".")]
    refusal = rf"`{re.escape(str(out))}`.*re-run `?ds2-make-shards"
    with pytest.raises(ValueError, match=refusal):
        load_index(out)  # what ds2-train reads first
    with pytest.raises(ValueError, match=refusal):
        make_dataset([str(out)], FeatureConfig())
    # A finished re-run is trusted again; a shard changed behind the index's back is refused, by name.
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(out), num_shards=4, seed=1), progress=False)
    assert sum(ShardSet.load([str(out)]).counts) == 8
    second = out / "shard-00001-of-00004.tfrecord"
    second.write_bytes(second.read_bytes()[:-1])
    with pytest.raises(ValueError, match=rf"shard-00001-of-00004.tfrecord.*re-run `?ds2-make-shards --out {out}"):
        ShardSet.load([str(out)])


def test_a_rerun_with_fewer_shards_removes_the_others(tmp_path):
    manifest, _ = make_manifest(tmp_path, n=4)
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=4), progress=False)
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2), progress=False)
    assert sorted(p.name for p in _written(tmp_path / "s")) == [
        "index.json", "shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord"]


def test_utterances_over_max_duration_are_skipped_unread(tmp_path, monkeypatch):
    """What training would drop anyway (longer than its `max_duration`) is not decoded at all: a 2-hour
    recording is judged by its header."""
    import deepspeech2.data.manifest as manifest_module
    from deepspeech2.data.pipeline import PipelineConfig

    manifest, utts = make_manifest(tmp_path, n=6, min_seconds=0.5, max_seconds=2.5)
    long_ones = {u.audio_filepath for u in utts if u.duration > 1.5}
    assert 0 < len(long_ones) < 6
    real, read = manifest_module.read_frames, []
    monkeypatch.setattr(manifest_module, "read_frames", lambda path, *a, **k: read.append(str(path)) or real(path, *a, **k))
    index = make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2,
                                                                   max_duration=1.5), progress=False)
    assert index["total_count"] == 6 - len(long_ones) and index["max_duration"] == 1.5
    too_long = [s for s in index["skipped"] if s["kind"] == "too_long"]
    assert {s["audio_filepath"] for s in too_long} == long_ones and not long_ones & set(read)
    assert all("over the 1.5 s" in s["reason"] for s in too_long)
    # The default is the longest utterance training keeps.
    assert ShardConfig("x").max_duration == PipelineConfig().max_duration


def test_cli_summary_counts_utterances_over_max_duration(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=4, min_seconds=0.5, max_seconds=2.5)
    Vocabulary.english().save(tmp_path / "vocab.txt")
    out = subprocess.run([sys.executable, "bin/ds2_make_shards.py", "--manifest", str(manifest), "--vocab",
                          str(tmp_path / "vocab.txt"), "--out", str(tmp_path / "s"), "--num_shards", "1",
                          "--max_duration", "1.5"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    n = sum(u.duration > 1.5 for u in utts)
    assert 0 < n < 4 and f"{n} longer than 1.5 s" in out.stdout
