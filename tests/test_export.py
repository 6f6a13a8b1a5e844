"""SavedModel export: the signatures saved_model_cli lists, log-probs and transcripts against the Keras model,
saved_model_cli run in a fresh process (TF Serving's TF1-style loader), in-graph input checks, versions,
assets.extra, and ds2-export."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from deepspeech2.audio import load_audio, speech_like_clip
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.decode import Decoder, DecoderConfig, GreedyStream
from deepspeech2.features import FeatureConfig, featurize
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.vocab import BLANK_ID, Vocabulary
from deepspeech2_export import ASSETS_EXTRA, SERVING_DEFAULT, TRANSCRIBE_WAV
from deepspeech2_export.requests import wav_bytes
from deepspeech2_export.saved_model import ExportConfig, export_model, greedy_transcripts, versions

from factories import make_manifest

VENV_BIN = Path(sys.executable).parent
EN = Vocabulary.english()

# A bigram LM over a few words (log10 probabilities), for the decoder an export records.


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    """A tiny model bundle (untrained, seeded weights: these tests compare the export with the Keras model)."""
    d = tmp_path_factory.mktemp("bundle")
    manifest, _ = make_manifest(d, n=4)
    keras.utils.set_random_seed(0)
    stats = compute_mean_std([manifest], FeatureConfig())
    return save_bundle(d / "model", build_model(TINY), TINY, EN, stats, {"note": "untrained"})


@pytest.fixture(scope="module")
def exported(bundle_dir, tmp_path_factory):
    """Version 1 of model "ds2", accepting at most 4 s of audio."""
    export_dir = tmp_path_factory.mktemp("export")
    return export_model(ExportConfig(str(bundle_dir), str(export_dir), max_audio_seconds=4.0))


@pytest.fixture(scope="module")
def clips():
    """Three utterances of different lengths, float32 in [-1, 1] as 16-bit WAV files hold them."""
    waves = [speech_like_clip(s, seed=i) for i, s in enumerate((1.3, 0.6, 2.1))]
    return [np.round(w * 32767) / 32768 for w in waves]


def keras_reference(bundle, wave):
    """One utterance through featurize + the Keras model, alone (no batch padding): (log_probs, greedy text)."""
    features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
    out = bundle.model({"features": features, "feature_lengths": frames}, training=False)
    steps = int(out["output_lengths"][0])
    log_probs = tf.nn.log_softmax(out["logits"])[0, :steps].numpy()
    text = Decoder(DecoderConfig(kind="greedy"), bundle.vocab).decode_utterances([log_probs])[0]
    return log_probs, text


def test_saved_model_cli_lists_the_signatures(exported):
    out = subprocess.run([str(VENV_BIN / "saved_model_cli"), "show", "--dir", str(exported), "--all"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for signature, inputs in ((SERVING_DEFAULT, {"waveforms": ("DT_FLOAT", "(-1, -1)"), "lengths": ("DT_INT32", "(-1)")}),
                              (TRANSCRIBE_WAV, {"wav": ("DT_STRING", "(-1)")})):
        block = text.split(f"signature_def['{signature}']:")[1].split("signature_def[")[0]
        for name, (dtype, shape) in inputs.items():
            assert re.search(rf"inputs\['{name}'\] tensor_info:\s+dtype: {dtype}\s+shape: {re.escape(shape)}", block)
        assert re.search(r"outputs\['log_probs'\] tensor_info:\s+dtype: DT_FLOAT\s+shape: \(-1, -1, 29\)", block)
        assert re.search(r"outputs\['output_lengths'\] tensor_info:\s+dtype: DT_INT32\s+shape: \(-1\)", block)
        assert re.search(r"outputs\['transcripts'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)", block)
        assert "Method name is: tensorflow/serving/predict" in block


def test_the_export_holds_only_stock_ops(exported, bundle_dir):
    """Made where the fused CPU GRU and front end train this model, the export holds stock ops only (inference never
    picks the fused ops): TF Serving and a process without the op library load it."""
    from tensorflow.core.protobuf import saved_model_pb2

    from deepspeech2.model import fused_cpu

    proto = saved_model_pb2.SavedModel.FromString((Path(exported) / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert "MatMul" in ops and not any(op.startswith("Ds2") for op in ops)
    fused = {op for op, kernel in [("Ds2GruForward", "float32"), ("Ds2BnClippedReluForward", "bn_clipped_relu")]
             if fused_cpu.supports(kernel)}
    if fused:  # the same model's training graph holds the ops here
        model = load_bundle(bundle_dir).model
        batch = {"features": tf.zeros((1, 40, 161)), "feature_lengths": tf.constant([40])}
        graph = tf.function(lambda: model(batch, training=True)).get_concrete_function().graph
        assert fused <= {op.type for op in graph.get_operations()}


def test_log_probs_and_transcripts_equal_the_keras_model(exported, bundle_dir, clips):
    bundle = load_bundle(bundle_dir)
    loaded = tf.saved_model.load(str(exported))
    # One padded batch through serving_default, and each WAV file through transcribe_wav.
    lengths = np.array([len(w) for w in clips], np.int32)
    batch = np.zeros((len(clips), lengths.max()), np.float32)
    for i, w in enumerate(clips):
        batch[i, :len(w)] = w
    padded = loaded.signatures[SERVING_DEFAULT](waveforms=tf.constant(batch), lengths=tf.constant(lengths))
    wavs = tf.constant([wav_bytes(w, 16000) for w in clips])
    from_wav = loaded.signatures[TRANSCRIBE_WAV](wav=wavs)
    texts = []
    for i, wave in enumerate(clips):
        reference, text = keras_reference(bundle, wave)
        texts.append(text)
        for outputs in (padded, from_wav):
            assert int(outputs["output_lengths"][i]) == len(reference)
            np.testing.assert_allclose(outputs["log_probs"][i, :len(reference)], reference, atol=1e-4)
            assert outputs["transcripts"][i].numpy().decode() == text
    assert any(texts), "the untrained model transcribes every clip as empty; the comparison says little"


def test_saved_model_cli_run_prints_the_transcript(exported, bundle_dir, clips, tmp_path):
    wav = tmp_path / "clip.wav"
    sf.write(wav, clips[0], 16000, subtype="PCM_16")
    _, expected = keras_reference(load_bundle(bundle_dir), load_audio(wav))
    np.save(tmp_path / "wav.npy", np.array([wav.read_bytes()], dtype=object))
    # A fresh process with TF1-style loading (a Session and the MetaGraph), as tensorflow_model_server does.
    out = subprocess.run([str(VENV_BIN / "saved_model_cli"), "run", "--dir", str(exported), "--tag_set", "serve",
                          "--signature_def", TRANSCRIBE_WAV, "--inputs", f"wav={tmp_path / 'wav.npy'}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = re.search(r"Result for output key transcripts:\n(.*)\n", out.stdout).group(1)
    assert ast.literal_eval(printed) == [expected.encode()]  # numpy prints one bytes item as a list literal


def test_bad_inputs_fail_in_the_graph_with_a_reason(exported, clips):
    loaded = tf.saved_model.load(str(exported))
    run = loaded.signatures[SERVING_DEFAULT]
    wave = clips[0]

    def fails(match, waveforms, lengths):
        with pytest.raises(tf.errors.InvalidArgumentError, match=match):
            run(waveforms=tf.constant(waveforms, tf.float32), lengths=tf.constant(lengths, tf.int32))

    fails("NaN or Inf", np.where(np.arange(len(wave)) == 5, np.nan, wave)[None], [len(wave)])
    fails("NaN or Inf", np.where(np.arange(len(wave)) == 5, np.inf, wave)[None], [len(wave)])
    fails("audio is empty or shorter than", wave[None], [0])
    fails("a length exceeds the samples", wave[None], [len(wave) + 1])
    fails("one entry per row", wave[None], [len(wave), 5])
    fails("longer than the 4 s", np.zeros((1, 4 * 16000 + 1)), [4 * 16000 + 1])
    fails("no audio", np.zeros((0, 1000)), np.zeros(0))
    wav = loaded.signatures[TRANSCRIBE_WAV]
    with pytest.raises(tf.errors.InvalidArgumentError, match="sample rate of the WAV must be 16000 Hz.*8000"):
        wav(wav=tf.constant([wav_bytes(wave, 8000)]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="RIFF"):
        wav(wav=tf.constant([b"RIFX this is not a wav file at all"]))


def test_greedy_transcripts_in_the_graph_match_the_library():
    rng = np.random.default_rng(0)
    ids = rng.choice([0, 0, 0, 1, 1, 3, 4, 5, 28], size=(6, 40))  # blanks, spaces, repeats
    ids[0, :4] = [1, 1, 0, 1]  # leading spaces
    log_probs = np.log(np.full((6, 40, EN.size), 0.01, np.float32))
    np.put_along_axis(log_probs, ids[..., None], np.log(0.7), axis=-1)
    lengths = np.array([40, 39, 10, 1, 0, 25], np.int32)
    got = greedy_transcripts(tf.constant(log_probs), tf.constant(lengths), EN.tokens()).numpy()
    assert [t.decode() for t in got] == Decoder(DecoderConfig(kind="greedy"), EN).decode_batch(log_probs, lengths)


def test_stream_pieces_in_the_graph_match_the_library_stream():
    ids = np.random.default_rng(1).choice([0, 0, 1, 1, 3, 4, 5, 28], size=60)  # blanks, spaces, repeats
    ids[5:9] = 3  # a run split by the boundary at 7
    ids[29:32] = [4, 0, 4]  # a repeat separated by a blank, across the boundaries at 30 and 31
    log_probs = np.log(np.where(np.arange(EN.size) == ids[:, None], 0.7, 0.01)).astype(np.float32)
    cuts = [0, 0, 1, 7, 7, 8, 30, 31, 60]  # empty and one-step chunks too
    stream, pieces, previous = GreedyStream(EN), "", BLANK_ID
    for start, end in zip(cuts[:-1], cuts[1:]):
        chunk = log_probs[None, start:end]
        piece = greedy_transcripts(tf.constant(chunk), tf.constant([end - start]), EN.tokens(), tf.constant([previous]),
                                   join=False)
        pieces += piece.numpy()[0].decode()  # a stream's pieces are appended as they are
        previous = int(np.argmax(chunk[0, -1])) if end > start else previous  # the state's last label
        assert " ".join(pieces.split()) == stream.update(chunk[0])


def test_versions_increase_atomically_and_are_never_overwritten(exported, bundle_dir, tmp_path, monkeypatch):
    base = tmp_path / "ds2"
    shutil.copytree(exported, base / "3")  # an earlier version
    (base / "notes").mkdir()  # not a version
    with pytest.raises(ValueError, match="not newer than .*3"):
        export_model(ExportConfig(str(bundle_dir), str(tmp_path), version=3))
    with pytest.raises(ValueError, match="not newer"):
        export_model(ExportConfig(str(bundle_dir), str(tmp_path), version=2))

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    with monkeypatch.context() as m:  # a failed export leaves neither a version nor its temporary folder
        m.setattr(tf.saved_model, "save", crash)
        with pytest.raises(RuntimeError, match="disk full"):
            export_model(ExportConfig(str(bundle_dir), str(tmp_path)))
    assert sorted(p.name for p in base.iterdir()) == ["3", "notes"]
    assert export_model(ExportConfig(str(bundle_dir), str(tmp_path))) == base / "4"
    assert versions(base) == [3, 4]
    assert sorted(p.name for p in base.iterdir()) == ["3", "4", "notes"]  # no temporary folder left


def test_assets_extra_and_the_cli(exported, bundle_dir, tmp_path, hello_world_lm):
    extra = exported / ASSETS_EXTRA
    for name in ("vocab.txt", "model_config.json", "feature_config.json", "mean_std.npz", "train_config.json",
                 "export.json", "tf_serving_warmup_requests"):
        assert (extra / name).is_file(), name
    assert not (extra / "decoder_config.json").exists()  # none given: ds2-serve falls back to a beam without LM
    info = json.loads((extra / "export.json").read_text())
    assert (info["version"], info["sample_rate"], info["max_audio_seconds"]) == (1, 16000, 4.0)
    assert Vocabulary.load(extra / "vocab.txt") == EN
    from tensorflow_serving.apis import prediction_log_pb2

    logs = [prediction_log_pb2.PredictionLog.FromString(r)
            for r in tf.data.TFRecordDataset(str(extra / "tf_serving_warmup_requests")).as_numpy_iterator()]
    assert [log.predict_log.request.model_spec.signature_name for log in logs] == [SERVING_DEFAULT, TRANSCRIBE_WAV]

    out = subprocess.run([str(VENV_BIN / "ds2-export"), "--model_dir", str(bundle_dir), "--export_dir",
                          str(tmp_path / "export"), "--model_name", "en", "--lm", str(hello_world_lm),
                          "--alpha", "0.7", "--beam_size", "8"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(tmp_path / "export" / "en" / "1")
    extra = tmp_path / "export" / "en" / "1" / ASSETS_EXTRA
    assert sorted((extra / "unigrams.txt").read_text().split()) == ["hello", "speech", "world"]
    decoder = DecoderConfig.from_dict(json.loads((extra / "decoder_config.json").read_text()))
    assert (decoder.lm_path, decoder.alpha, decoder.beam_size) == (str(hello_world_lm), 0.7, 8)

    bad = subprocess.run([str(VENV_BIN / "ds2-export"), "--model_dir", str(tmp_path / "nope"), "--export_dir",
                          str(tmp_path / "export")], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("ds2-export: error: ") and "nope" in line
