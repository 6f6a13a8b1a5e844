import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from deepspeech2.audio import DURATION_TOLERANCE, save_wav, speech_like_clip
from deepspeech2.data.manifest import (Utterance, audio_span, duration_mismatch, filter_utterances, iter_manifest,
                                       load_utterance, normalize_manifest, read_manifest, read_manifests,
                                       write_manifest)


def test_roundtrip_relative_paths_and_extra_keys(tmp_path):
    (tmp_path / "wav").mkdir()
    utts = [Utterance(str(tmp_path / "wav" / "a.wav"), 1.5, "hello", speaker="s1", language="en",
                      extra={"utt": "a", "feat_shape": [10, 161]}),
            Utterance("/elsewhere/b.flac", 2.0, "world", offset=3.25)]
    path = tmp_path / "m.jsonl"
    assert write_manifest(path, utts) == 2
    first = json.loads(path.read_text().splitlines()[0])
    assert first["audio_filepath"] == "wav/a.wav"  # stored relative to the manifest's folder
    assert first["utt"] == "a" and "offset" not in first
    back = read_manifest(path)
    assert back == utts and back[0].extra == utts[0].extra


def test_moving_the_folder_keeps_paths_valid(tmp_path):
    (tmp_path / "a" / "wav").mkdir(parents=True)
    (tmp_path / "a" / "wav" / "x.wav").write_bytes(b"")
    write_manifest(tmp_path / "a" / "m.jsonl", [Utterance(str(tmp_path / "a" / "wav" / "x.wav"), 1.0, "x")])
    (tmp_path / "a").rename(tmp_path / "b")
    assert read_manifest(tmp_path / "b" / "m.jsonl")[0].audio_filepath == str((tmp_path / "b" / "wav" / "x.wav"))


def test_nemo_and_paddlespeech_lines_load(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"audio_filepath": "/x/1.wav", "duration": 3.1, "text": "hi", "offset": 0.5}\n'
                    '\n'
                    '{"audio_filepath": "/x/2.wav", "duration": 2, "text": "yo", "utt": "2", "token": "y o"}\n')
    lines = list(iter_manifest(path))
    assert [n for n, _ in lines] == [1, 3]
    assert lines[0][1].offset == 0.5 and lines[1][1].extra == {"utt": "2", "token": "y o"}


@pytest.mark.parametrize("line,match", [
    ("{not json", "not valid JSON"),
    ('["a"]', "expected a JSON object"),
    ('{"audio_filepath": "a.wav", "text": "x"}', r"missing required field\(s\) \['duration'\]"),
    ('{"audio_filepath": "a.wav", "duration": -1, "text": "x"}', "`duration` must be a non-negative"),
    ('{"audio_filepath": "a.wav", "duration": 1, "text": 5}', "`text` must be a string"),
    # json.loads takes NaN (and `NaN < 0` is False), Infinity, and numbers past a float's range.
    ('{"audio_filepath": "a.wav", "duration": NaN, "text": "x"}', "`duration` must be .*finite.* got nan"),
    ('{"audio_filepath": "a.wav", "duration": Infinity, "text": "x"}', "`duration` must be .*finite.* got inf"),
    ('{"audio_filepath": "a.wav", "duration": 1e999, "text": "x"}', "`duration` must be .*finite.* got inf"),
    ('{"audio_filepath": "a.wav", "duration": 1%s, "text": "x"}' % ("0" * 400), "`duration` must be .*finite"),
    ('{"audio_filepath": "a.wav", "duration": 1, "offset": NaN, "text": "x"}', "`offset` must be .*finite"),
    ('{"audio_filepath": "a.wav", "duration": 1, "offset": -Infinity, "text": "x"}', "`offset` must be .*finite"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"audio_filepath": "a.wav", "duration": 1, "text": "ok"}\n' + line + "\n")
    with pytest.raises(ValueError, match=match) as e:
        read_manifest(path)
    assert f"{path}:2" in str(e.value)


def test_a_line_that_is_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"audio_filepath": "a.wav", "duration": 1, "text": "ok"}\n'
                     + '{"audio_filepath": "a.wav", "duration": 1, "text": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"not valid UTF-8 \(byte 0xe9 at column 56\)") as e:
        read_manifest(path)
    assert f"{path}:2" in str(e.value)


def test_paths_read_through_a_symlinked_folder_stay_relative(tmp_path):
    # `data` -> `disk/real`: the link sits at another depth than its target, so a relative path that climbs
    # out of `data` with `..` would land somewhere else.
    real = tmp_path / "disk" / "real"
    (real / "wav").mkdir(parents=True)
    (real / "wav" / "a.wav").write_bytes(b"")
    (real / "wav" / "b.wav").symlink_to(real / "wav" / "a.wav")  # a linked file keeps its own name
    (tmp_path / "data").symlink_to(real, target_is_directory=True)
    data = tmp_path / "data"
    write_manifest(data / "m.jsonl", [Utterance(str(data / "wav" / name), 1.0, "a") for name in ("a.wav", "b.wav")])
    write_manifest(data / "clean.jsonl", read_manifest(data / "m.jsonl"))  # read back resolved: disk/real/wav
    assert [json.loads(line)["audio_filepath"] for line in (data / "clean.jsonl").read_text().splitlines()] == [
        "wav/a.wav", "wav/b.wav"]
    assert all(os.path.exists(u.audio_filepath) for u in read_manifest(data / "clean.jsonl"))


def test_filter_and_merge(tmp_path):
    utts = [Utterance(f"/a/{i}.wav", d, t) for i, (d, t) in enumerate([(0.5, "ab"), (3.0, "a#"), (20.0, "b")])]
    assert [u.duration for u in filter_utterances(utts, min_duration=1.0)] == [3.0, 20.0]
    assert [u.duration for u in filter_utterances(utts, max_duration=10.0, charset=set("ab"))] == [0.5]
    with pytest.raises(ValueError, match="min_duration"):
        filter_utterances(utts, min_duration=5, max_duration=1)
    write_manifest(tmp_path / "1.jsonl", utts[:1])
    write_manifest(tmp_path / "2.jsonl", utts[1:])
    assert read_manifests([tmp_path / "1.jsonl", tmp_path / "2.jsonl"]) == utts


def test_an_offset_key_makes_a_segment_even_at_zero(tmp_path):
    # The first segment of a TED-LIUM talk, or of any NeMo segmented manifest, starts at 0: it is not
    # the whole file. `offset` present (even 0) = a segment; absent = the whole file.
    path = tmp_path / "m.jsonl"
    path.write_text('{"audio_filepath": "/x/talk.wav", "duration": 2.0, "text": "a", "offset": 0}\n'
                    '{"audio_filepath": "/x/talk.wav", "duration": 2.0, "text": "b", "offset": 0.0}\n'
                    '{"audio_filepath": "/x/whole.wav", "duration": 2.0, "text": "c"}\n'
                    '{"audio_filepath": "/x/whole.wav", "duration": 2.0, "text": "d", "offset": null}\n')
    utts = read_manifest(path)
    assert [(u.offset, u.is_segment) for u in utts] == [(0.0, True), (0.0, True), (None, False), (None, False)]
    write_manifest(tmp_path / "out.jsonl", utts)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line.get("offset", "absent") for line in lines] == [0.0, 0.0, "absent", "absent"]
    assert read_manifest(tmp_path / "out.jsonl") == utts
    assert Utterance("/x/a.wav", 1.0, "a", offset=0.0).is_segment and not Utterance("/x/a.wav", 1.0, "a").is_segment


def test_one_offset_and_duration_rule(tmp_path):
    clip = speech_like_clip(1.0)
    save_wav(tmp_path / "one.wav", clip)
    pcm, _ = sf.read(tmp_path / "one.wav", dtype="float32")
    path = str(tmp_path / "one.wav")
    tol = DURATION_TOLERANCE
    # Whole file: its duration must be the file's length within the tolerance; all of it is used.
    for duration, ok in [(1.0, True), (1.0 - tol / 2, True), (1.0 + tol / 2, True), (1.0 - 1.5 * tol, False),
                         (1.0 + 1.5 * tol, False)]:
        u = Utterance(path, duration, "x")
        assert audio_span(u, 16000, 16000) == (0, 16000)
        assert (duration_mismatch(u, 16000, 16000) is None) == ok, duration
        if ok:
            np.testing.assert_array_equal(load_utterance(u), pcm)
        else:
            with pytest.raises(ValueError, match="manifest says"):
                load_utterance(u)
    # Segments: [offset, offset + duration), cut at the end when within the tolerance past it.
    for offset, duration, span in [(0.0, 0.5, (0, 8000)), (0.25, 0.5, (4000, 12000)),
                                   (0.8, 0.2 + tol / 2, (12800, 16000))]:
        u = Utterance(path, duration, "x", offset=offset)
        assert audio_span(u, 16000, 16000) == span and duration_mismatch(u, 16000, 16000) is None
        np.testing.assert_array_equal(load_utterance(u), pcm[span[0]:span[1]])
    for offset, duration in [(0.8, 0.2 + 1.5 * tol), (1.0, 0.01), (1.5, 0.5)]:
        u = Utterance(path, duration, "x", offset=offset)
        assert duration_mismatch(u, 16000, 16000) is not None
        with pytest.raises(ValueError, match="segment"):
            load_utterance(u)
    # Resampled and downmixed on the way: 22.05 kHz stereo, 0.5 s from 0.
    sf.write(tmp_path / "st.wav", np.stack([speech_like_clip(1.0, sample_rate=22050)] * 2, 1), 22050)
    wav = load_utterance(Utterance(str(tmp_path / "st.wav"), 0.5, "x", offset=0.0))
    assert wav.shape == (8000,)


def test_normalize_manifest(tmp_path):
    path = tmp_path / "raw.jsonl"
    rows = [{"audio_filepath": "/x/1.wav", "duration": 1.0, "text": "The quick brown fox, 2 dogs.", "id": "a"},
            {"audio_filepath": "/x/2.wav", "duration": 1.0, "text": "already normal", "offset": 0.0},
            {"audio_filepath": "/x/3.wav", "duration": 1.0, "text": "Score: 3-2"},  # can't be read confidently
            {"audio_filepath": "/x/4.wav", "duration": 1.0, "text": "?!"}]  # nothing left
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = normalize_manifest(path, tmp_path / "out.jsonl", "en")
    out = read_manifest(tmp_path / "out.jsonl")
    assert [u.text for u in out] == ["the quick brown fox two dogs", "already normal"]
    assert out[0].extra == {"id": "a"} and out[1].offset == 0.0  # everything else is kept
    assert (report.written, report.changed, [n for n, _ in report.dropped]) == (2, 1, [3, 4])
    dropped = [json.loads(line) for line in report.dropped_path.read_text().splitlines()]
    assert [d["line"] for d in dropped] == [3, 4] and "3-2" in dropped[0]["reasons"][0]
    assert json.loads(dropped[1]["entry"]) == rows[3]
    # Mandarin; and nothing left is an error, not an empty manifest.
    path.write_text(json.dumps({"audio_filepath": "/x/1.wav", "duration": 1.0, "text": "我们有2个苹果。"}) + "\n")
    assert normalize_manifest(path, tmp_path / "zh.jsonl", "zh").written == 1
    assert read_manifest(tmp_path / "zh.jsonl")[0].text == "我们有两个苹果"
    path.write_text(json.dumps(rows[2]) + "\n")
    with pytest.raises(ValueError, match="no line .* is left"):
        normalize_manifest(path, tmp_path / "none.jsonl", "en")
    assert not (tmp_path / "none.jsonl").exists()
    with pytest.raises(ValueError, match="`language`"):
        normalize_manifest(path, tmp_path / "x.jsonl", "fr")


def test_normalize_cli(tmp_path):
    path = tmp_path / "raw.jsonl"
    path.write_text(json.dumps({"audio_filepath": "/x/1.wav", "duration": 1.0, "text": "Hello, World!"}) + "\n"
                    + json.dumps({"audio_filepath": "/x/2.wav", "duration": 1.0, "text": "9/11"}) + "\n")
    cli = [sys.executable, "bin/ds2_prepare.py", "normalize", str(path), "--language", "en"]
    out = subprocess.run(cli + ["--out", str(tmp_path / "n.jsonl")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [u.text for u in read_manifest(tmp_path / "n.jsonl")] == ["hello world"]
    assert "kept 1 lines (1 changed by normalization), dropped 1" in out.stdout
    missing = subprocess.run(cli, capture_output=True, text=True)
    assert missing.returncode != 0 and missing.stderr.strip().splitlines()[-1] == (
        "ds2-prepare normalize: error: `--out` is required for `ds2-prepare normalize`")


def test_sample_utterances_is_seeded_in_order_and_all_when_asked_for_more():
    from deepspeech2.data.manifest import sample_utterances

    utts = [Utterance(f"{i}.wav", 1.0, str(i)) for i in range(10)]
    picked = sample_utterances(utts, 4, seed=3)
    assert len(picked) == 4 and picked == sorted(picked, key=utts.index)
    assert picked == sample_utterances(utts, 4, seed=3) != sample_utterances(utts, 4, seed=4)
    assert sample_utterances(utts, 0) == sample_utterances(utts, 10) == sample_utterances(utts, 11) == utts
