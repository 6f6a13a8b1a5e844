import json

import pytest

from deepspeech2.data.manifest import (Utterance, filter_utterances, iter_manifest, read_manifest,
                                       read_manifests, write_manifest)


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
])
def test_bad_lines_name_file_and_line(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"audio_filepath": "a.wav", "duration": 1, "text": "ok"}\n' + line + "\n")
    with pytest.raises(ValueError, match=match) as e:
        read_manifest(path)
    assert f"{path}:2" in str(e.value)


def test_filter_and_merge(tmp_path):
    utts = [Utterance(f"/a/{i}.wav", d, t) for i, (d, t) in enumerate([(0.5, "ab"), (3.0, "a#"), (20.0, "b")])]
    assert [u.duration for u in filter_utterances(utts, min_duration=1.0)] == [3.0, 20.0]
    assert [u.duration for u in filter_utterances(utts, max_duration=10.0, charset=set("ab"))] == [0.5]
    with pytest.raises(ValueError, match="min_duration"):
        filter_utterances(utts, min_duration=5, max_duration=1)
    write_manifest(tmp_path / "1.jsonl", utts[:1])
    write_manifest(tmp_path / "2.jsonl", utts[1:])
    assert read_manifests([tmp_path / "1.jsonl", tmp_path / "2.jsonl"]) == utts
