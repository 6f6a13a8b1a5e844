"""Mandarin through the deployment path: a character model with `<unk>` exported with its UTF-8 vocabulary,
transcripts over gRPC (the Predict API, ds2-client) and from ds2-infer as proper UTF-8 Chinese, each equal to
the library's greedy decoding of the Keras model; and ds2-eval's report headed by CER."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import jiwer
import keras
import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf
from tensorflow_serving.apis import prediction_service_pb2_grpc

from deepspeech2.audio import speech_like_clip
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.features import FeatureConfig, featurize
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.text import is_cjk
from deepspeech2.vocab import UNK_CHAR, Vocabulary
from deepspeech2_export import ASSETS_EXTRA
from deepspeech2_export.requests import wav_bytes
from deepspeech2_export.saved_model import ExportConfig, export_model
from deepspeech2_serving.client import wav_request

from factories import make_manifest

VENV_BIN = Path(sys.executable).parent
RATE = 16000
ZH = Vocabulary.from_texts(["你好吗我很好谢谢今天天气不错"])  # blank, <unk>, 12 characters


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny Mandarin bundle (untrained; seeded, its output bias lifted off the blank so that it writes
    characters) exported as model "ds2" version 1; returns (bundle, export base, folder)."""
    d = tmp_path_factory.mktemp("zh")
    manifest, _ = make_manifest(d, n=4)
    keras.utils.set_random_seed(3)
    config = dataclasses.replace(TINY, vocab_size=ZH.size)
    net = build_model(config)
    head = net.layers[-1] if net.layers[-1].weights else next(l for l in reversed(net.layers) if l.weights)
    kernel, bias = head.get_weights()
    head.set_weights([kernel * 8.0, bias - 2.0 * (np.arange(ZH.size) == 0)])  # sharp, and rarely blank
    bundle_dir = save_bundle(d / "model", net, config, ZH, compute_mean_std([manifest], FeatureConfig()))
    export_model(ExportConfig(str(bundle_dir), str(d / "export"), max_audio_seconds=4.0))
    return load_bundle(bundle_dir), d / "export" / "ds2", d


@pytest.fixture(scope="module")
def clips(model):
    """Three WAV files and, per file, the library's greedy transcript of the Keras model."""
    bundle, _, d = model
    out = []
    for i, seconds in enumerate((1.1, 0.7, 1.6)):
        wave = (np.round(speech_like_clip(seconds, seed=10 + i) * 32767) / 32768).astype(np.float32)
        path = d / f"clip{i}.wav"
        path.write_bytes(wav_bytes(wave, RATE))
        features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
        logits = bundle.model({"features": features, "feature_lengths": frames}, training=False)
        log_probs = tf.nn.log_softmax(logits["logits"])[0, :int(logits["output_lengths"][0])].numpy()
        out.append((path, Decoder(DecoderConfig(kind="greedy"), ZH).decode_utterances([log_probs])[0]))
    return out


def test_a_six_thousand_character_output_layer_trains(tmp_path):
    """DS2 §6.2's Mandarin output size: the trainer sizes the output layer from the vocabulary (6,002 ids:
    blank, <unk>, 6,000 characters), labels up to the last id train, and the bundle round-trips it."""
    from deepspeech2.data.pipeline import PipelineConfig
    from deepspeech2.data.shards import ShardConfig, make_shards
    from deepspeech2.train.config import OptimizationConfig, TrainConfig
    from deepspeech2.train.trainer import train

    chars = [chr(0x4E00 + i) for i in range(6000)]
    vocab = Vocabulary.from_texts(["".join(chars)])
    vocab.save(tmp_path / "vocab.txt")
    _, utts = make_manifest(tmp_path, n=8, min_seconds=1.0, max_seconds=1.6)
    texts = ["".join(chars[-1 - 7 * i - k] for k in range(4)) for i in range(8)]  # ids near the top, and <unk>
    texts[0] = texts[0][:3] + "龙"  # U+9F99, outside the vocabulary: encoded as <unk>
    utts = [dataclasses.replace(u, text=t, language="zh") for u, t in zip(utts, texts)]
    write_manifest(tmp_path / "zh.jsonl", utts)
    index = make_shards(tmp_path / "zh.jsonl", vocab, ShardConfig(str(tmp_path / "shards"), num_shards=2),
                        progress=False)
    assert index["unknown_characters"]["count"] == 1
    compute_mean_std([tmp_path / "zh.jsonl"], FeatureConfig()).save(tmp_path / "mean_std.npz")
    result = train(TrainConfig(workdir=str(tmp_path / "run"), train_shards=(str(tmp_path / "shards"),),
                               dev_shards=(str(tmp_path / "shards"),), vocab_path=str(tmp_path / "vocab.txt"),
                               normalizer_path=str(tmp_path / "mean_std.npz"), model=TINY, model_name="tiny",
                               pipeline=PipelineConfig(batch_size=4, num_buckets=0), epochs=1, verbose=0,
                               optimization=OptimizationConfig(warmup_steps=1, learning_rate=1e-3)))
    assert result["step"] == 2 and np.all(np.isfinite(result["loss"]))
    bundle = load_bundle(tmp_path / "run" / "model")
    assert bundle.model_config.vocab_size == bundle.vocab.size == 6002 and bundle.vocab == vocab
    x = np.zeros((1, 100, 161), np.float32)
    assert bundle.model({"features": x, "feature_lengths": np.array([100], np.int32)})["logits"].shape[-1] == 6002


def test_the_reference_transcripts_are_chinese(clips):
    texts = [t for _, t in clips]
    assert all(texts) and all(is_cjk(c) or c == UNK_CHAR for t in texts for c in t), texts
    assert sum(len(t) for t in texts) >= 6


def test_export_carries_the_utf8_vocabulary(model):
    bundle, base, _ = model
    vocab_file = base / "1" / ASSETS_EXTRA / "vocab.txt"
    assert Vocabulary.load(vocab_file) == ZH == bundle.vocab
    lines = vocab_file.read_bytes().decode("utf-8").split("\n")
    assert lines[:3] == ["<blank>", "<unk>", "不"]  # <unk> by name; characters as UTF-8, not escapes


def test_transcripts_over_grpc_and_ds2_client_are_utf8_chinese(model, clips, tmp_path):
    _, base, _ = model
    port_file = tmp_path / "port"
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen([str(VENV_BIN / "ds2-serve"), "--model_base_path", str(base), "--port", "0",
                                 "--port_file", str(port_file)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 180
        while not port_file.exists():
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "ds2-serve did not start in 180 s"
            time.sleep(0.1)
        address = f"127.0.0.1:{int(port_file.read_text())}"
        with grpc.insecure_channel(address) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            for path, text in clips:
                response = stub.Predict(wav_request("ds2", path.read_bytes()), 60)
                [raw] = tf.make_ndarray(response.outputs["transcripts"])
                assert raw.decode("utf-8") == text  # the bytes on the wire are UTF-8
        out = subprocess.run([str(VENV_BIN / "ds2-client"), "--server", address, "--json", str(tmp_path / "r.json"),
                              *[str(p) for p, _ in clips]], capture_output=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.decode("utf-8").splitlines() == [f"{p}\t{t}" for p, t in clips]
        report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
        assert [r["transcript"] for r in report["results"]] == [t for _, t in clips]
        assert "\\u" not in (tmp_path / "r.json").read_text(encoding="utf-8")  # written as characters
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, (tmp_path / "serve.log").read_text()[-3000:]


def test_ds2_infer_prints_utf8_chinese(model, clips):
    _, _, d = model
    out = subprocess.run([str(VENV_BIN / "ds2-infer"), "--model_dir", str(d / "model"), *[str(p) for p, _ in clips]],
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.decode("utf-8").splitlines() == [f"{p}\t{t}" for p, t in clips]


def test_ds2_eval_heads_with_cer_and_counts_characters_outside_the_vocabulary(model, clips, tmp_path):
    _, _, d = model
    refs = ["你好吗", "谢谢你们", "天气很好"]  # 们 is outside the vocabulary: only <unk> could answer it
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, [Utterance(str(p), sf.info(str(p)).duration, r, language="zh")
                              for (p, _), r in zip(clips, refs)])
    out = subprocess.run([str(VENV_BIN / "ds2-eval"), "--model_dir", str(d / "model"), "--manifest", str(manifest),
                          "--report", str(tmp_path / "r.json")], capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.decode("utf-8").splitlines()
    assert lines[1].startswith("CER ") and lines[2].startswith("WER ")  # CER is the headline for Mandarin
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    hyps = [u["hypothesis"] for u in report["utterances"]]
    assert hyps == [t for _, t in clips]
    assert report["headline_metric"] == "cer" and not report["language_spaced"]
    assert report["totals"]["cer"] == pytest.approx(jiwer.cer(refs, hyps))
    assert report["out_of_vocabulary"]["chars"] == 1 and report["out_of_vocabulary"]["most_common"] == [["们", 1]]
    assert "1 reference characters (9.09%, 1 distinct, in 1 utterances) are outside the vocabulary" in lines[3]


# ------------------------------------------------------------------------------------- recipes (slow)

REPO = Path(__file__).resolve().parents[1]
HAVE_LMPLZ = (VENV_BIN / "lmplz").exists()


def _aishell_layout(root: Path) -> None:
    """A miniature data_aishell/: 3 speakers' WAVs in wav/{train,dev,test}/<spk>/ (clips long enough for
    their text at the model's stride) and the v0.8 transcript (words space-separated, as Aishell writes them)."""
    sentences = ["今天 天气 很 好", "我们 去 公园", "你 好 吗",
                 "谢谢 你们", "天气 不错", "我 很 好"]
    lines = []
    for k, (split, spk) in enumerate([("train", "S0002")] * 4 + [("train", "S0003")] * 4 + [("dev", "S0724")] * 2
                                     + [("test", "S0764")] * 2):
        utt = f"BAC009{spk}W{121 + k:04d}"
        path = root / "data_aishell" / "wav" / split / spk / f"{utt}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(wav_bytes(speech_like_clip(2.0 + 0.1 * k, seed=k).astype(np.float32), RATE))
        lines.append(f"{utt} {sentences[k % len(sentences)]}")
    (root / "data_aishell" / "transcript").mkdir(parents=True)
    (root / "data_aishell" / "transcript" / "aishell_transcript_v0.8.txt").write_text("\n".join(lines) + "\n",
                                                                                       encoding="utf-8")


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LMPLZ, reason="needs `make kenlm` (lmplz)")
def test_aishell_recipe_runs_end_to_end(tmp_path):
    """examples/aishell/run.sh as documented, on a miniature Aishell-1 layout with a tiny model: every stage
    runs, the test report is headed by CER and agrees with jiwer, and a re-run resumes instead of redoing."""
    _aishell_layout(tmp_path / "corpus")
    env = {**os.environ, "DATA": str(tmp_path / "data"), "RUN": str(tmp_path / "run"),
           "BIN": str(VENV_BIN), "LM_ORDER": "2", "BEAM": "8", "NUM_SHARDS": "2",
           "GRID": "--alpha_from 0 --alpha_to 1 --num_alphas 2 --beta_from 0 --beta_to 1 --num_betas 2",
           "TRAIN_FLAGS": "--model=tiny --model_overrides={\"feature_dim\":193} --epochs=1 --batch_frames=0 --batch_size=4 "
                          "--warmup_steps=1 --augmentation= --checkpoint_every_steps=10"}
    out = subprocess.run(["bash", "examples/aishell/run.sh", str(tmp_path / "corpus")], cwd=REPO, env=env,
                         capture_output=True, timeout=1500)
    stdout = out.stdout.decode("utf-8")
    assert out.returncode == 0, stdout[-3000:] + out.stderr.decode("utf-8", "replace")[-3000:]
    for stage in range(1, 8):
        assert f"==> [{stage}/7]" in stdout
    vocab = Vocabulary.load(tmp_path / "data" / "vocab.txt")
    assert vocab.unk_id == 1 and not vocab.spaced and "园" in vocab.chars
    tune = json.loads((tmp_path / "run" / "tune.json").read_text())
    assert tune["metric"] == "cer"
    for kind in ("greedy", "lm"):
        report = json.loads((tmp_path / "run" / f"test_{kind}.json").read_text(encoding="utf-8"))
        assert report["headline_metric"] == "cer" and report["totals"]["scored"] == 2
        refs, hyps = [u["reference"] for u in report["utterances"]], [u["hypothesis"] for u in report["utterances"]]
        assert refs == ["天气不错", "我很好"]  # Aishell's word spaces removed: characters only
        assert report["totals"]["cer"] == pytest.approx(jiwer.cer(refs, hyps))
    done = [tmp_path / "data" / f for f in ("test.jsonl", "vocab.txt", "test.clean.jsonl", "shards/train/index.json",
                                            "mean_std.npz", "lm/char2.bin")] + [tmp_path / "run" / "tune.json"]
    stamps = [p.stat().st_mtime_ns for p in done]
    again = subprocess.run(["bash", "examples/aishell/run.sh", str(tmp_path / "corpus")], cwd=REPO, env=env,
                           capture_output=True, timeout=1500)
    assert again.returncode == 0, again.stderr.decode("utf-8", "replace")[-3000:]
    assert [p.stat().st_mtime_ns for p in done] == stamps  # finished stages are not redone


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LMPLZ, reason="needs `make kenlm` (lmplz)")
def test_make_demo_lang_zh_small_end_to_end(checkout_copy):
    """`make demo LANG=zh DEMO_SIZE=small` in a copy of the checkout: every stage announced, results/demo_zh.json
    with `test.cer_lm` and `test.cer_greedy` equal to jiwer's CER of the per-utterance transcripts, served
    transcripts in UTF-8 Chinese, and the English demo's results untouched."""
    work = checkout_copy
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    out = subprocess.run(["make", "-o", ".venv/.installed", "demo", "LANG=zh", "DEMO_SIZE=small"], cwd=work, env=env, capture_output=True,
                         timeout=1800)
    stdout = out.stdout.decode("utf-8")
    assert out.returncode == 0, stdout[-4000:] + out.stderr.decode("utf-8", "replace")[-4000:]
    for stage in range(1, 9):
        assert f"==> [{stage}/8]" in stdout, f"stage {stage} not announced"
    summary = json.loads((work / "results" / "demo_zh.json").read_text(encoding="utf-8"))
    assert summary == json.loads((work / "results" / "zh" / "small" / "demo.json").read_text(encoding="utf-8"))
    for kind in ("greedy", "lm"):
        report = json.loads((work / "results" / "zh" / "small" / f"test_{kind}.json").read_text(encoding="utf-8"))
        assert report["headline_metric"] == "cer"
        refs, hyps = [u["reference"] for u in report["utterances"]], [u["hypothesis"] for u in report["utterances"]]
        assert all(is_cjk(c) for r in refs for c in r)
        assert summary["test"][f"cer_{kind}"] == pytest.approx(jiwer.cer(refs, hyps), abs=1e-9)
    assert json.loads((work / "results" / "zh" / "small" / "tune.json").read_text())["metric"] == "cer"
    assert summary["serving"]["transcribed"] == 3 and summary["serving"]["failed"] == 0
    assert not (work / "results" / "demo.json").exists()
