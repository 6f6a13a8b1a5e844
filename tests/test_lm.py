"""ds2-build-lm: text -> normalized corpus -> lmplz -> build_binary -> unigram list, and its errors.

Needs KenLM's lmplz and build_binary (`make kenlm`, about 2 minutes on 2 cores); the tests that run them
are skipped, saying so, when they aren't built.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import kenlm
import numpy as np
import pytest

from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.lm import UNKNOWN_WORD, LMConfig, build_lm, corpus_line, find_kenlm_tool
from deepspeech2.vocab import Vocabulary

try:
    find_kenlm_tool("lmplz"), find_kenlm_tool("build_binary")
    HAVE_KENLM = True
except FileNotFoundError:
    HAVE_KENLM = False
needs_kenlm = pytest.mark.skipif(not HAVE_KENLM, reason="KenLM's lmplz/build_binary are not built: run `make kenlm`")

TEXT = """The cat sat on the mat.
the cat sat on the mat
The dog ate 2 bones!

a cat and a dog
the score was 3-2
the dog sat on the cat
"""


@needs_kenlm
def test_build_lm_end_to_end(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    (tmp_path / "b.txt").write_text("the mat is red\n")
    result = build_lm(LMConfig(text_paths=(str(tmp_path / "a.txt"), str(tmp_path / "b.txt")),
                               out=str(tmp_path / "lm" / "tiny"), order=3))
    assert result.model_path == tmp_path / "lm" / "tiny.bin"
    assert result.arpa_path == tmp_path / "lm" / "tiny.arpa" and result.arpa_path.exists()
    assert (result.lines_read, result.lines_dropped) == (7, 1)  # "3-2" can't be read confidently
    words = result.unigrams_path.read_text().split("\n")[:-1]
    assert sorted(words) == sorted({"the", "cat", "sat", "on", "mat", "dog", "ate", "two", "bones", "a", "and",
                                    "is", "red"})
    assert words[0] == "the"  # most frequent first
    assert result.ngrams[1] == len(words) + 3  # + <s> </s> <unk>
    for path in (result.model_path, result.arpa_path):
        model = kenlm.Model(str(path))
        assert model.order == 3
        assert model.score("the cat sat on the mat") > model.score("the mat sat on the cat")
    report = json.loads(result.report_path.read_text())
    assert report["config"]["order"] == 3 and report["lines_dropped"] == 1
    assert sorted(p.name for p in (tmp_path / "lm").iterdir()) == ["tiny.arpa", "tiny.bin", "tiny.json",
                                                                  "tiny.unigrams.txt"]  # no temp files left
    # The decoder loads the binary with its unigram list from beside it.
    vocab = Vocabulary.english()
    decoder = Decoder(DecoderConfig(beam_size=8, lm_path=str(result.model_path), num_workers=1), vocab)
    assert len(decoder.search.ctc._language_model._unigram_set) == len(words)
    assert decoder.decode_utterances([np.log(np.eye(vocab.size)[[0] * 5] * 0.99 + 0.01 / vocab.size)]) == [""]


@needs_kenlm
def test_top_k_quantization_and_binary_without_unigrams(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT * 3)
    result = build_lm(LMConfig(text_paths=(str(tmp_path / "a.txt"),), out=str(tmp_path / "k.bin"), order=2,
                               top_k=4, quantize_bits=8, keep_arpa=False, prune=(0, 1)))
    assert result.arpa_path is None and not (tmp_path / "k.arpa").exists()
    words = result.unigrams_path.read_text().split()
    assert len(words) == 4 and UNKNOWN_WORD not in words and words[0] == "the"
    assert "UNKNOWNWORD" in kenlm.Model(str(result.model_path))  # the other words are one token in the LM
    result.unigrams_path.unlink()
    with pytest.raises(FileNotFoundError, match="unigram list"):
        Decoder(DecoderConfig(lm_path=str(result.model_path)), Vocabulary.english())


@needs_kenlm
def test_character_lm(tmp_path):
    (tmp_path / "zh.txt").write_text("你好吗？\n我很好，谢谢。\n你好\n")
    result = build_lm(LMConfig(text_paths=(str(tmp_path / "zh.txt"),), out=str(tmp_path / "zh"), language="zh",
                               order=3, binary=False))
    assert result.model_path == tmp_path / "zh.arpa"
    assert set(result.unigrams_path.read_text().split()) == set("你好吗我很谢")
    assert result.tokens == 10  # 3 + 5 + 2 characters


@needs_kenlm
def test_text_weights_count_a_file_as_repeating_it_would(tmp_path):
    (tmp_path / "small.txt").write_text("the cat sat\nthe dog ran\n")
    (tmp_path / "large.txt").write_text(TEXT)
    (tmp_path / "small3.txt").write_text((tmp_path / "small.txt").read_text() * 3)
    weighted = build_lm(LMConfig(text_paths=(str(tmp_path / "small.txt"), str(tmp_path / "large.txt")),
                                 text_weights=(3, 1), out=str(tmp_path / "w"), order=3, binary=False))
    repeated = build_lm(LMConfig(text_paths=(str(tmp_path / "small3.txt"), str(tmp_path / "large.txt")),
                                 out=str(tmp_path / "r"), order=3, binary=False))
    assert weighted.arpa_path.read_text() == repeated.arpa_path.read_text()
    assert weighted.tokens == repeated.tokens == 3 * 6 + 28
    assert (weighted.lines_read, weighted.lines_dropped) == (2 + 6, 1)  # each line read once
    assert json.loads(weighted.report_path.read_text())["config"]["text_weights"] == [3, 1]
    once = build_lm(LMConfig(text_paths=(str(tmp_path / "small.txt"), str(tmp_path / "large.txt")),
                             out=str(tmp_path / "o"), order=3, binary=False))
    assert kenlm.Model(str(weighted.arpa_path)).score("the dog ran") > kenlm.Model(str(once.arpa_path)).score(
        "the dog ran")


def test_corpus_lines():
    assert corpus_line("It's 3:30, we owe $5!", "en") == "it's three thirty we owe five dollars"
    assert corpus_line("the score was 3-2", "en") == ""
    assert corpus_line("我有 3 个苹果。", "zh") == "我 有 三 个 苹 果"
    assert corpus_line("  already   normalized ", "en", normalize_text=False) == "already normalized"


@needs_kenlm
def test_empty_corpus(tmp_path):
    (tmp_path / "e.txt").write_text("\n\nthe score was 3-2\n")
    with pytest.raises(ValueError, match="corpus is empty: 1 non-empty lines.*1 of them could not be normalized"):
        build_lm(LMConfig(text_paths=(str(tmp_path / "e.txt"),), out=str(tmp_path / "e"), order=3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.txt"]


def test_missing_tools_and_inputs(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    with pytest.raises(FileNotFoundError, match="make kenlm"):
        build_lm(LMConfig(text_paths=(str(tmp_path / "a.txt"),), out=str(tmp_path / "x"), kenlm_bin_dir=str(tmp_path)))
    if HAVE_KENLM:
        with pytest.raises(FileNotFoundError, match="`text_paths`"):
            build_lm(LMConfig(text_paths=(str(tmp_path / "missing.txt"),), out=str(tmp_path / "x")))


def test_config_checks():
    ok = dict(text_paths=("a.txt",), out="lm")
    for bad, name in ((dict(text_paths=()), "text_paths"), (dict(order=1), "order"), (dict(order=7), "order"),
                      (dict(language="fr"), "language"), (dict(order=2, prune=(0, 1, 1)), "prune"),
                      (dict(prune=(1, 1)), "prune"), (dict(prune=(0, 2, 1)), "prune"), (dict(top_k=-1), "top_k"),
                      (dict(quantize_bits=30), "quantize_bits"), (dict(binary=False, quantize_bits=8), "quantize_bits"),
                      (dict(binary=False, keep_arpa=False), "keep_arpa"), (dict(text_weights=(1, 2)), "text_weights"),
                      (dict(text_weights=(0,)), "text_weights"), (dict(text_weights=(1.5,)), "text_weights")):
        with pytest.raises(ValueError, match=f"`{name}`"):
            LMConfig(**{**ok, **bad})
    assert LMConfig(text_paths=["a.txt"], out="d/lm.bin").prefix == Path("d/lm")


@needs_kenlm
def test_cli(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    cli = [sys.executable, str(Path(__file__).parents[1] / "bin" / "ds2_build_lm.py")]
    done = subprocess.run(cli + ["--text_paths", str(tmp_path / "a.txt"), "--out", str(tmp_path / "lm"),
                                 "--order", "3", "--prune", "0,0,1"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "lm.bin: 3-gram LM" in done.stdout and (tmp_path / "lm.unigrams.txt").exists()
    done = subprocess.run(cli + ["--text_paths", str(tmp_path / "a.txt"), "--out", str(tmp_path / "lm"),
                                 "--order", "9"], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("ds2-build-lm: error: `order`")


def test_token_follows_the_language_and_must_fit_it():
    assert LMConfig(text_paths=("a.txt",), out="lm").token == "word"
    assert LMConfig(text_paths=("a.txt",), out="lm", language="zh").token == "char"
    assert LMConfig(text_paths=("a.txt",), out="lm", language="zh", token="char").to_dict()["token"] == "char"
    for bad in (dict(token="char"), dict(language="zh", token="word")):  # English is a word LM, Mandarin a char LM
        with pytest.raises(ValueError, match="`token` .* does not fit `language`"):
            LMConfig(text_paths=("a.txt",), out="lm", **bad)
    with pytest.raises(ValueError, match="`token` must be one of"):
        LMConfig(text_paths=("a.txt",), out="lm", token="bpe")
    assert corpus_line("我们 好！", "zh", token="char") == "我 们 好"


@needs_kenlm
def test_cli_token_char_builds_a_character_lm_that_decodes(tmp_path):
    (tmp_path / "zh.txt").write_text("你好吗？\n我很好，谢谢。\n你好\n你好吗\n", encoding="utf-8")
    cli = [sys.executable, str(Path(__file__).parents[1] / "bin" / "ds2_build_lm.py")]
    done = subprocess.run(cli + ["--text_paths", str(tmp_path / "zh.txt"), "--out", str(tmp_path / "char3"),
                                 "--order", "3", "--token", "char"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "char3.json").read_text())
    assert (report["config"]["language"], report["config"]["token"], report["tokens"]) == ("zh", "char", 13)
    model = kenlm.Model(str(tmp_path / "char3.bin"))
    assert model.score("你 好 吗") > model.score("你 号 吗")  # 号 is unknown to the LM
    # The decoder reads the binary with its character list and lets the LM pick 好 over the louder 号.
    vocab = Vocabulary.from_texts(["你好号吗我很谢"])
    probs = np.full((5, vocab.size), 1e-4)
    for t, dist in enumerate([{"你": 0.99}, {}, {"号": 0.55, "好": 0.44}, {}, {"吗": 0.99}]):
        probs[t, [vocab.encode(c)[0] for c in dist]] = list(dist.values())
        probs[t, 0] = max(1 - probs[t].sum(), 1e-4)
    log_probs = np.log(probs / probs.sum(-1, keepdims=True)).astype(np.float32)
    config = DecoderConfig(lm_path=str(tmp_path / "char3.bin"), alpha=0.5, beta=0.5, beam_size=16, num_workers=1)
    assert Decoder(config, vocab).decode_utterances([log_probs]) == ["你好吗"]
    assert Decoder(DecoderConfig(kind="greedy"), vocab).decode_utterances([log_probs]) == ["你号吗"]
    bad = subprocess.run(cli + ["--text_paths", str(tmp_path / "zh.txt"), "--out", str(tmp_path / "x"),
                                "--token", "char", "--language", "en"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("ds2-build-lm: error: `token`")


@needs_kenlm
def test_gzipped_text_in_capitals_is_lowercased_without_normalizing(tmp_path):
    """librispeech-lm-norm.txt.gz's shape: gzipped, normalized in capitals. --nonormalize --lowercase gives the LM
    that the same text in lower case gives."""
    import gzip

    capitals = "THE CAT SAT ON THE MAT\nTHE DOG'S BONE\n\nA CAT AND A DOG\n"
    with gzip.open(tmp_path / "lm-norm.txt.gz", "wt") as f:
        f.write(capitals)
    (tmp_path / "lower.txt").write_text(capitals.lower())
    a = build_lm(LMConfig(text_paths=(str(tmp_path / "lm-norm.txt.gz"),), out=str(tmp_path / "a"), order=2,
                          normalize=False, lowercase=True))
    b = build_lm(LMConfig(text_paths=(str(tmp_path / "lower.txt"),), out=str(tmp_path / "b"), order=2))
    assert a.arpa_path.read_text() == b.arpa_path.read_text()
    assert a.unigrams_path.read_text() == b.unigrams_path.read_text() and "dog's\n" in a.unigrams_path.read_text()
    assert (a.lines_read, a.lines_dropped, a.tokens) == (3, 0, 14)


@needs_kenlm
def test_an_official_arpa_in_capitals_becomes_a_lowercase_binary(tmp_path):
    """LibriSpeech's official ARPA models (openslr 11) spell words in capitals, after a blank line: --arpa
    --lowercase gives the same model over lower-case words, its unigram list and binary, which the decoder uses."""
    import gzip

    (tmp_path / "caps.txt").write_text(TEXT.upper())
    caps = build_lm(LMConfig(text_paths=(str(tmp_path / "caps.txt"),), out=str(tmp_path / "caps"), order=3,
                             normalize=False, binary=False))
    with gzip.open(tmp_path / "3-gram.arpa.gz", "wt") as f:
        f.write("\n" + caps.arpa_path.read_text())
    cli = [sys.executable, str(Path(__file__).parents[1] / "bin" / "ds2_build_lm.py")]
    done = subprocess.run(cli + ["--arpa", str(tmp_path / "3-gram.arpa.gz"), "--lowercase", "--out",
                                 str(tmp_path / "lm" / "official"), "--nokeep_arpa"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{tmp_path / 'lm' / 'official.bin'}: 3-gram LM, n-grams {caps.ngrams}")
    assert sorted(p.name for p in (tmp_path / "lm").iterdir()) == ["official.bin", "official.json",
                                                                  "official.unigrams.txt"]
    words = (tmp_path / "lm" / "official.unigrams.txt").read_text().split()
    assert sorted(words) == sorted(w.lower() for w in caps.unigrams_path.read_text().split())
    upper, lower = kenlm.Model(str(caps.arpa_path)), kenlm.Model(str(tmp_path / "lm" / "official.bin"))
    for sentence in ("the cat sat on the mat", "the mat sat on the dog", "a bones"):
        assert lower.score(sentence) == pytest.approx(upper.score(sentence.upper()), abs=1e-4)
    (tmp_path / "notes.txt").write_text("not a model\n")
    with pytest.raises(ValueError, match=r"`arpa`: .*notes.txt is not an ARPA model"):
        build_lm(LMConfig(text_paths=(), arpa=str(tmp_path / "notes.txt"), out=str(tmp_path / "x")))
    with pytest.raises(ValueError, match="not both"):
        LMConfig(text_paths=("a.txt",), arpa="b.arpa", out="x")


@needs_kenlm
def test_a_corrupt_gzip_is_named(tmp_path):
    (tmp_path / "lm-norm.txt.gz").write_bytes(b"not gzip at all\n")
    with pytest.raises(ValueError, match=r"`.*lm-norm.txt.gz` could not be read: .*download it again"):
        build_lm(LMConfig(text_paths=(str(tmp_path / "lm-norm.txt.gz"),), out=str(tmp_path / "x")))
    with pytest.raises(ValueError, match=r"`arpa`: .*lm-norm.txt.gz could not be read: .*download it again"):
        build_lm(LMConfig(text_paths=(), arpa=str(tmp_path / "lm-norm.txt.gz"), out=str(tmp_path / "x")))


@needs_kenlm
def test_an_interrupted_rebuild_leaves_the_previous_lm_whole(tmp_path):
    """Ctrl-C while build_binary runs: the LM's files are the previous build's, all of them, never the new word list
    beside the old binary."""
    cli = [sys.executable, str(Path(__file__).parents[1] / "bin" / "ds2_build_lm.py")]
    (tmp_path / "old.txt").write_text(TEXT)
    (tmp_path / "new.txt").write_text("a new corpus with other words\nzebras graze far away\n")
    out = tmp_path / "lm" / "en"
    done = subprocess.run(cli + ["--text_paths", str(tmp_path / "old.txt"), "--out", str(out), "--order", "2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    before = {p.name: p.read_bytes() for p in out.parent.iterdir()}
    # KenLM's tools, with a build_binary that says when it starts and then takes its time.
    tools, started = tmp_path / "kenlm", tmp_path / "build_binary.started"
    tools.mkdir()
    (tools / "lmplz").symlink_to(find_kenlm_tool("lmplz"))
    real = find_kenlm_tool("build_binary")
    (tools / "build_binary").write_text(f'#!/bin/sh\ntouch {started}\nsleep 120\nexec {real} "$@"\n')
    (tools / "build_binary").chmod(0o755)
    proc = subprocess.Popen(cli + ["--text_paths", str(tmp_path / "new.txt"), "--out", str(out), "--order", "2",
                                   "--kenlm_bin_dir", str(tools)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert {p.name: p.read_bytes() for p in out.parent.iterdir()} == before  # no new file, no temp folder left
    decoder = Decoder(DecoderConfig(beam_size=8, lm_path=f"{out}.bin", num_workers=1), Vocabulary.english())
    assert "cat" in decoder.search.ctc._language_model._unigram_set


@needs_kenlm
def test_a_binary_beside_another_builds_word_list_is_refused(tmp_path):
    """What a crash between the renames of a rebuild would leave: the report names the files of one build."""
    (tmp_path / "a.txt").write_text(TEXT)
    (tmp_path / "b.txt").write_text("zebras graze far away\n")
    one = build_lm(LMConfig(text_paths=(str(tmp_path / "a.txt"),), out=str(tmp_path / "one" / "en"), order=2))
    two = build_lm(LMConfig(text_paths=(str(tmp_path / "b.txt"),), out=str(tmp_path / "two" / "en"), order=2))
    assert json.loads(one.report_path.read_text())["files"]["en.unigrams.txt"]["bytes"] == \
        one.unigrams_path.stat().st_size
    one.unigrams_path.write_bytes(two.unigrams_path.read_bytes())
    with pytest.raises(ValueError, match=r"en\.unigrams\.txt` is not the file .*en\.json` records.*build the LM again"):
        Decoder(DecoderConfig(beam_size=8, lm_path=str(one.model_path), num_workers=1), Vocabulary.english())
