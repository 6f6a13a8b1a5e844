"""ds2-demo's page end to end in real headless Chromium (Debian's chromium and chromium-driver, driven by Selenium).

The microphone is Chromium's fake capture device playing a WAV of a spoken sentence (espeak-ng, as the tiny corpus
makes them); the page downsamples it in its AudioWorklet and streams it over the WebSocket while the button is
held. Both of ds2-demo's modes are driven: a small streaming model (partial transcripts while the button is held)
and a small bidirectional one, whose export has no stream_step (push to talk: the utterance is transcribed when
the button is released, here with an LM of the sentence's words). Each is trained here until it transcribes that
sentence (a real model whose answer is known: an untrained one would give noise that no test could check). The
reference is the Keras model's transcript of the whole WAV (greedy; the bidirectional one: the LM beam search over
its log-probs); the browser's path (the fake device's resampling, the worklet's filter) changes the audio
slightly, so the transcripts must agree within a small CER. With an LM (both modes) the final transcript's words
come with their times and confidences (issue 39): the page shows each word as the final message gives it (read
from the DOM: its text, times and confidence, and the tooltip), for a file at the times `decode_words` gives on
the Keras model's log-probs (within three output steps: the browser resamples the file), and clicking a word plays
the uploaded file from its start; greedy finals show no words. Slow (it trains two models and drives a browser, a
few minutes): `make test-slow` (which CI's .ci/run runs) installs Chromium (`tools/apt-deps.sh browser`) and runs
it; elsewhere it is skipped when Chromium is missing.

The WebSocket's limits as a browser meets them run on an untrained model (they don't look at transcripts): the page
opened as localhost works, a page of another origin (another port) can't open the WebSocket, and the page reconnects
after the server closed its idle connection. tests/test_demo_limits.py checks the same limits with raw clients.
"""

import contextlib
import dataclasses
import functools
import http.server
import io
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import jiwer
import keras
import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from deepspeech2.audio import resample, save_wav, speech_like_clip
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.decode import Decoder, DecoderConfig, greedy_decode
from deepspeech2.decode.words import FrameClock, decode_words
from deepspeech2.features import FeatureConfig, Normalizer, featurize
from deepspeech2.model import build_model
from deepspeech2.model.ctc import ctc_loss
from deepspeech2.model_config import DS2_STREAMING
from deepspeech2.vocab import Vocabulary
from deepspeech2_export.saved_model import ExportConfig, export_model

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER and shutil.which("espeak-ng")),
                                 reason="needs chromium, chromium-driver and espeak-ng (tools/apt-deps.sh base browser)")]

RATE = 16000
SENTENCE = "open the window"
# A ds2-streaming model shrunk to learn one sentence in a few hundred steps: time stride 2 (50 outputs/s,
# room for CTC's blanks), two GRU-128 layers, row conv τ = 2.
CONFIG = dataclasses.replace(DS2_STREAMING, conv_filters=(8, 8), conv_strides=((2, 2), (1, 2)), rnn_layers=2,
                             rnn_units=128, row_conv_context=2)
# The same, bidirectional: an offline model (no stream_step), ds2-demo's push-to-talk mode.
OFFLINE_CONFIG = dataclasses.replace(CONFIG, bidirectional=True, row_conv_context=0)
# A 2-gram LM of the sentence's words (ARPA, as tests/conftest.py's), for the offline mode's LM beam search.
SENTENCE_ARPA = """\\data\\
ngram 1=6
ngram 2=4

\\1-grams:
-2.0\t<unk>\t0
0\t<s>\t-0.3
-1.0\t</s>\t0
-1.0\topen\t-0.3
-1.0\tthe\t-0.3
-1.0\twindow\t-0.3

\\2-grams:
-0.1\t<s> open
-0.1\topen the
-0.1\tthe window
-0.1\twindow </s>

\\end\\
"""
LM_DECODER = dict(beam_size=16, alpha=0.5, beta=1.0, num_workers=1)
MAX_CER = 0.15  # browser path vs the offline transcript: two characters of "open the window"
# A file's word times through the browser vs `decode_words` on the WAV: three output steps of 20 ms (the page
# decodes the file at the browser's rate and resamples it to 16 kHz, which may move a CTC spike by a step).
TIME_TOLERANCE = 0.06
WAIT = 120  # seconds any one browser condition may take on a busy 2-core machine (a limit, not a measurement)


def spoken(text: str) -> np.ndarray:
    """`text` read by espeak-ng's en-us voice, at 16 kHz, peak 0.5."""
    out = subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "--stdout", text], capture_output=True, check=True)
    wav, rate = sf.read(io.BytesIO(out.stdout), dtype="float32")
    wav = resample(wav, rate, RATE)
    return (0.5 * wav / np.abs(wav).max()).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def train_on_sentence(speech: np.ndarray, folder: Path, config=CONFIG, max_steps: int = 1500) -> Path:
    """A `config` bundle trained until it transcribes `speech` as SENTENCE within `MAX_CER`, the same way for copies
    changed as a browser changes audio (low-passed, quieter, shifted, noisy, longer silences). BatchNorm runs on
    its moving statistics throughout (training=False), so training and streaming compute the same function."""
    clip = np.concatenate([silence(0.3), speech, silence(0.5)])
    low = resample(resample(clip, RATE, 48000), 48000, RATE)[:len(clip)]  # as 48 kHz capture and back
    noise = 0.003 * np.random.default_rng(0).standard_normal(len(clip)).astype(np.float32)
    waves = [clip, low, 0.6 * clip, np.roll(clip, 1500), np.roll(low, -2000) + noise,
             np.concatenate([silence(1.5), speech, silence(2.0)])]
    lengths = np.array([len(w) for w in waves], np.int32)
    batch = np.stack([np.pad(w, (0, lengths.max() - len(w))) for w in waves])
    features = FeatureConfig()
    raw, _ = featurize(clip[None], [len(clip)], features, None)
    raw = raw[0].numpy()
    normalizer = Normalizer(raw.mean(0).astype(np.float32), (raw.std(0) + 1e-3).astype(np.float32), features)
    x, frames = featurize(batch, lengths, features, normalizer)
    vocab = Vocabulary.english()
    labels = np.array([vocab.encode(SENTENCE)] * len(waves), np.int32)
    label_lengths = np.full(len(waves), labels.shape[1], np.int32)
    keras.utils.set_random_seed(0)
    model = build_model(config)
    optimizer = keras.optimizers.Adam(1e-2, global_clipnorm=100)
    ctc = tf.function(ctc_loss, jit_compile=True)  # XLA: ~3x faster CTC on CPU (see ctc_loss)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            out = model({"features": x, "feature_lengths": frames}, training=False)
            loss = tf.reduce_mean(ctc(labels, label_lengths, out["logits"], out["output_lengths"]))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return tf.nn.log_softmax(out["logits"]), out["output_lengths"]

    for i in range(max_steps):
        log_probs, steps = step()
        if i % 20 == 19:
            texts = [vocab.decode(ids) for ids in greedy_decode(log_probs.numpy(), steps.numpy())]
            if len(set(texts)) == 1 and jiwer.cer(SENTENCE, texts[0]) <= MAX_CER:
                break
    else:
        pytest.fail(f"the model did not learn {SENTENCE!r} in {max_steps} steps: {texts}")
    return save_bundle(folder / "model", model, config, vocab, normalizer)


def reference_words(bundle_dir: Path, wav: Path, decoder: DecoderConfig) -> list:
    """The words of the whole `wav` a final transcript should show: `decode_words` over the Keras model's log-probs
    with `decoder`'s LM beam search and the model's clock (no word config: the demo's export has none)."""
    bundle = load_bundle(bundle_dir)
    clock = FrameClock.of(bundle.model_config, bundle.feature_config)
    duration = len(sf.read(wav)[0]) / RATE
    return decode_words(Decoder(decoder, Vocabulary.english()).search, log_probs_of(bundle_dir, wav), clock,
                        duration=duration)[1]


def log_probs_of(bundle_dir: Path, wav: Path) -> np.ndarray:
    """The Keras model's `(steps, vocab)` log-probs of the whole `wav`."""
    bundle = load_bundle(bundle_dir)
    audio, _ = sf.read(wav, dtype="float32")
    features, frames = featurize(audio[None], [len(audio)], bundle.feature_config, bundle.normalizer)
    out = bundle.model({"features": features, "feature_lengths": frames}, training=False)
    return tf.nn.log_softmax(out["logits"])[0, :int(out["output_lengths"][0])].numpy()


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory):
    """SENTENCE spoken, and the fake microphone's WAV of it. The WAV starts with 4 s of silence: Chromium plays it
    from the moment the page asks for the microphone, and the page needs a moment (seconds on a busy machine)
    before its AudioWorklet takes the audio."""
    folder = tmp_path_factory.mktemp("page")
    speech = spoken(SENTENCE)
    wav = folder / "mic.wav"
    save_wav(wav, np.concatenate([silence(4.0), speech, silence(2.5)]))
    return speech, wav


@functools.cache
def export_of(bundle_dir: Path) -> str:
    """The bundle exported once, beside it: ds2-demo serves exports (its command exports a bundle the same way)."""
    return str(export_model(ExportConfig(str(bundle_dir), str(Path(bundle_dir).parent / "export"))))


@pytest.fixture(scope="module")
def wav_and_reference(tmp_path_factory, speech_wav):
    """The fake microphone's WAV, the trained streaming bundle, and the model's greedy transcript of the whole WAV."""
    speech, wav = speech_wav
    bundle_dir = train_on_sentence(speech, tmp_path_factory.mktemp("streaming"))
    log_probs = log_probs_of(bundle_dir, wav)
    reference = Vocabulary.english().decode(greedy_decode(log_probs[None], np.array([len(log_probs)]))[0])
    assert jiwer.cer(SENTENCE, reference) <= MAX_CER  # the model knows the sentence: answers can be checked
    return wav, bundle_dir, reference


@pytest.fixture(scope="module")
def sentence_lm(tmp_path_factory) -> DecoderConfig:
    """The LM beam decoder over the sentence's words."""
    arpa = tmp_path_factory.mktemp("lm") / "sentence.arpa"
    arpa.write_text(SENTENCE_ARPA)
    return DecoderConfig(lm_path=str(arpa), **LM_DECODER)


@pytest.fixture(scope="module")
def offline_model(tmp_path_factory, speech_wav, sentence_lm):
    """The trained bidirectional bundle, the LM decoder over the sentence's words, and the reference: that LM beam
    search over the model's log-probs of the whole WAV."""
    speech, wav = speech_wav
    bundle_dir = train_on_sentence(speech, tmp_path_factory.mktemp("offline"), OFFLINE_CONFIG)
    reference = Decoder(sentence_lm, Vocabulary.english()).decode_utterances([log_probs_of(bundle_dir, wav)])[0]
    assert jiwer.cer(SENTENCE, reference) <= MAX_CER
    return bundle_dir, sentence_lm, reference


@pytest.fixture(scope="module")
def demo(wav_and_reference):
    from deepspeech2_serving.demo import DemoConfig, start

    _, bundle_dir, _ = wav_and_reference
    running = start(DemoConfig(export_of(bundle_dir), port=0))
    yield running
    running.stop()


def chromium(wav: Path | None):
    """Headless Chromium through chromium-driver with a fake microphone: with `wav`, it plays that file once
    (`%noloop`) from the moment the page opens it, the permission granted; without, a beep, the permission
    left to the test."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,900",
                "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(arg)
    options.add_argument("--use-fake-device-for-media-stream")
    if wav is not None:
        options.add_argument("--use-fake-ui-for-media-stream")
        options.add_argument(f"--use-file-for-fake-audio-capture={wav}%noloop")
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_script_timeout(WAIT)
    return driver


def page_state(driver) -> dict:
    return driver.execute_script("return window.ds2Demo ? {state: ds2Demo.state, mode: ds2Demo.mode, partials: "
                                 "ds2Demo.partials, finals: ds2Demo.finals, errors: ds2Demo.errors, levels: "
                                 "ds2Demo.levels, recorded_samples: ds2Demo.recordedSamples, words: ds2Demo.words} "
                                 ": null;")


# The final transcript's words as the page shows them: each word's span in the transcript.
SHOWN_WORDS = """return [...document.querySelectorAll("#transcript .word")].map((w) => ({word: w.textContent,
  start: Number(w.dataset.start), end: Number(w.dataset.end), confidence: Number(w.dataset.confidence),
  title: w.title, button: w.getAttribute("role") === "button" && w.tabIndex === 0}));"""
TOOLTIP = re.compile(r"(\d+\.\d\d)–(\d+\.\d\d) s, confidence (\d+)%")


def shown_words(driver, final: dict, file: bool) -> list[dict]:
    """The words the page shows for the `final` message, checked against it: each word of the transcript a span
    with the word's times and confidence, in its tooltip too (to 10 ms and 1%), and a button that plays the
    uploaded audio from its start for a `file`. The transcript still reads as its text."""
    from selenium.webdriver.common.by import By

    shown = driver.execute_script(SHOWN_WORDS)
    assert [{k: w[k] for k in ("word", "start", "end", "confidence")} for w in shown] == final["words"], shown
    assert [w["word"] for w in shown] == final["text"].split() and len(shown) >= 2
    assert driver.find_element(By.ID, "transcript").text == final["text"]
    for w in shown:
        start, end, percent = TOOLTIP.fullmatch(w["title"]).groups()
        assert abs(float(start) - w["start"]) <= 0.005 + 1e-9 and abs(float(end) - w["end"]) <= 0.005 + 1e-9, w
        assert abs(int(percent) - 100 * w["confidence"]) <= 0.5 + 1e-9 and 0 <= w["confidence"] <= 1, w
        assert w["button"] == file, w
    assert all(a["start"] <= b["start"] for a, b in zip(shown, shown[1:]))
    assert all(0 <= w["start"] <= w["end"] <= final["audio_seconds"] for w in shown)
    assert driver.find_element(By.ID, "words-note").is_displayed()
    return shown


def check_file_words(driver, final: dict, reference: list) -> None:
    """A file's words as the page shows them (`shown_words`) are at the reference's times (`reference_words`),
    and clicking the last one plays the uploaded file from its start."""
    from selenium.webdriver.common.by import By

    shown = shown_words(driver, final, file=True)
    matched = [(w, r) for w, r in zip(shown, reference) if w["word"] == r.word]
    assert len(matched) >= 2, (shown, reference)
    for w, r in matched:
        assert abs(w["start"] - r.start) <= TIME_TOLERANCE and abs(w["end"] - r.end) <= TIME_TOLERANCE, (w, r)
    player = driver.find_element(By.ID, "player")
    assert player.is_displayed()
    position, paused, src = driver.execute_script(
        "const words = document.querySelectorAll('#transcript .word'); words[words.length - 1].click(); "
        "const player = document.getElementById('player'); return [player.currentTime, player.paused, player.src];")
    assert src.startswith("blob:") and not paused  # the uploaded file, playing
    assert position == pytest.approx(shown[-1]["start"], abs=1e-3)  # from the word's start


def wait_for(driver, condition, what: str) -> dict:
    """The page's state once `condition(state)` holds (polled every 0.1 s, at most WAIT seconds)."""
    from selenium.webdriver.support.ui import WebDriverWait

    def met(d):
        state = page_state(d)
        return state if condition(state) else False

    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(met)
    except Exception:
        raise AssertionError(f"{what}; the page: {page_state(driver)}") from None


@pytest.fixture
def browser(wav_and_reference):
    driver = chromium(wav_and_reference[0])
    yield driver
    driver.quit()


def test_page_loads_talks_and_transcribes_a_file(demo, browser, wav_and_reference, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    wav, _, reference = wav_and_reference
    browser.get(demo.url)
    assert browser.title == "DeepSpeech2 live demo"
    state = wait_for(browser, lambda s: s and s["state"] == "ready", "the page never connected")
    assert "final transcripts: greedy" in browser.find_element(By.ID, "model").text
    assert state["words"] is False  # greedy finals: no search to time words with
    assert state["mode"] == "streaming" and browser.find_element(By.ID, "mode").text.startswith("Streaming")
    assert not browser.find_element(By.ID, "level").is_displayed()  # the partials show that it hears you

    # Push to talk: hold the button until the sentence is over (the partial transcript, non-empty, stayed the
    # same over 1.5 s of audio: the WAV ends in 2.5 s of silence), then release.
    button = browser.find_element(By.ID, "talk")
    ActionChains(browser).click_and_hold(button).perform()
    wait_for(browser, lambda s: s["state"] == "recording", "pressing the button did not start recording")

    def sentence_over(state):
        partials = state["partials"]
        if not partials or not partials[-1]["text"]:
            return False
        first = next(p for p in partials if p["text"] == partials[-1]["text"])
        return partials[-1]["audio_seconds"] - first["audio_seconds"] >= 1.5

    state = wait_for(browser, sentence_over, "the partial transcripts never settled")
    ActionChains(browser).release(button).perform()
    partials = [p["text"] for p in state["partials"]]
    state = wait_for(browser, lambda s: len(s["finals"]) == 1 and s["state"] == "ready", "no final transcript")
    final = state["finals"][0]
    assert jiwer.cer(reference, final["text"]) <= MAX_CER, (final, partials)
    assert browser.find_element(By.ID, "transcript").text == final["text"]
    assert final["words"] == [] and browser.execute_script(SHOWN_WORDS) == []  # greedy: no words shown
    assert not browser.find_element(By.ID, "words-note").is_displayed()
    assert len(set(partials)) >= 3  # the transcript grew while the button was held
    assert all(final["greedy"].startswith(p.rstrip()) for p in partials)  # each partial: the greedy text so far
    assert final["audio_seconds"] > 1.5 and final["rtf"] > 0 and final["client_latency_ms"] > 0
    for cell in ("latency", "server-latency", "rtf"):  # the latency and the real-time factor are shown
        assert browser.find_element(By.ID, cell).text not in ("", "–")
    assert not state["errors"]
    screenshot = tmp_path / "ds2-demo.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # File upload: the same WAV through the file input.
    browser.find_element(By.ID, "file").send_keys(str(wav))
    state = wait_for(browser, lambda s: len(s["finals"]) == 2 and s["state"] == "ready", "the file got no transcript")
    assert jiwer.cer(reference, state["finals"][1]["text"]) <= MAX_CER, state["finals"][1]
    assert state["finals"][1]["audio_seconds"] == pytest.approx(len(sf.read(wav)[0]) / RATE, abs=0.05)
    assert browser.execute_script(SHOWN_WORDS) == []

    # An unsupported file: a clear error on the page, and the page still works.
    bad = tmp_path / "notes.wav"
    bad.write_bytes(b"this is not audio")
    browser.find_element(By.ID, "file").send_keys(str(bad))
    state = wait_for(browser, lambda s: s["errors"], "an undecodable file showed no error")
    assert state["errors"][0]["code"] == "unsupported_audio" and "notes.wav" in state["errors"][0]["message"]
    assert browser.find_element(By.ID, "error").is_displayed() and state["state"] == "ready"


def test_streaming_with_an_lm_shows_a_files_words_and_plays_from_one(wav_and_reference, sentence_lm):
    """The streaming model with the sentence's LM: the final transcript of an uploaded file comes with its words,
    shown at `decode_words`' times on the Keras model's log-probs, and a click on a word plays the file from it."""
    from selenium.webdriver.common.by import By

    from deepspeech2_serving.demo import DemoConfig, start

    wav, bundle_dir, _ = wav_and_reference
    reference = reference_words(bundle_dir, wav, sentence_lm)
    running = start(DemoConfig(export_of(bundle_dir), port=0, decoder=sentence_lm))
    driver = chromium(None)
    try:
        driver.get(running.url)
        state = wait_for(driver, lambda s: s and s["state"] == "ready", "the page never connected")
        assert state["mode"] == "streaming" and state["words"] is True
        assert "beam + LM with word times" in driver.find_element(By.ID, "model").text
        driver.find_element(By.ID, "file").send_keys(str(wav))
        state = wait_for(driver, lambda s: len(s["finals"]) == 1 and s["state"] == "ready", "the file got no "
                         "transcript")
        final = state["finals"][0]
        assert jiwer.cer(" ".join(r.word for r in reference), final["text"]) <= MAX_CER, (final, reference)
        check_file_words(driver, final, reference)
        assert not state["errors"]
    finally:
        driver.quit()
        running.stop()


def test_offline_model_is_push_to_talk_with_the_lm(offline_model, speech_wav):
    """A bidirectional export (no stream_step): the page says push to talk, records while the button is held
    (no partials), and the final transcript, the LM beam search over the whole utterance, comes on release, with
    its words (for a file: at `decode_words`' times, and a click on one plays the file from it)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from deepspeech2_serving.demo import DemoConfig, start

    bundle_dir, decoder, reference = offline_model
    wav = speech_wav[1]
    running = start(DemoConfig(export_of(bundle_dir), port=0, decoder=decoder))
    driver = chromium(wav)
    try:
        driver.get(running.url)
        state = wait_for(driver, lambda s: s and s["state"] == "ready", "the page never connected")
        assert state["mode"] == "offline" and state["words"] is True
        assert "final transcripts: beam + LM with word times" in driver.find_element(By.ID, "model").text
        assert driver.find_element(By.ID, "mode").text.startswith("Push to talk")
        assert "up to 60 s" in driver.find_element(By.ID, "how").text  # the export's and the flag's limit

        # Hold the button until the sentence is over: a loud chunk went by, then 1.5 s of quiet ones (the WAV
        # ends in 2.5 s of silence). The page shows how much it recorded, and no transcript yet.
        button = driver.find_element(By.ID, "talk")
        ActionChains(driver).click_and_hold(button).perform()
        wait_for(driver, lambda s: s["state"] == "recording", "pressing the button did not start recording")
        assert driver.find_element(By.ID, "level").is_displayed()

        def sentence_over(state):
            loud = [i for i, level in enumerate(state["levels"]) if level > 0.1]
            return bool(loud) and len(state["levels"]) - 1 - loud[-1] >= 15

        state = wait_for(driver, sentence_over, "the microphone never carried the sentence")
        assert driver.find_element(By.ID, "transcript").text.startswith("Recording…")
        assert button.text == "Recording… release to transcribe"
        ActionChains(driver).release(button).perform()
        state = wait_for(driver, lambda s: len(s["finals"]) == 1 and s["state"] == "ready", "no final transcript")
        final = state["finals"][0]
        assert jiwer.cer(reference, final["text"]) <= MAX_CER, final
        assert final["decoder"] == "beam + LM" and final["batch_size"] == 1 and not state["partials"]
        assert final["audio_seconds"] == state["recorded_samples"] / RATE  # the server heard all the page recorded
        shown_words(driver, final, file=False)  # the microphone's audio is not kept: no playing from a word
        assert not driver.find_element(By.ID, "player").is_displayed()
        for cell in ("latency", "server-latency", "rtf"):
            assert driver.find_element(By.ID, cell).text not in ("", "–")
        assert not state["errors"]

        # A file: the same WAV, transcribed whole.
        driver.find_element(By.ID, "file").send_keys(str(wav))
        state = wait_for(driver, lambda s: len(s["finals"]) == 2 and s["state"] == "ready", "the file got no "
                         "transcript")
        assert jiwer.cer(reference, state["finals"][1]["text"]) <= MAX_CER, state["finals"][1]
        assert state["finals"][1]["audio_seconds"] == pytest.approx(len(sf.read(wav)[0]) / RATE, abs=0.05)
        check_file_words(driver, state["finals"][1], reference_words(bundle_dir, wav, decoder))
        assert not state["partials"] and not state["errors"]
    finally:
        driver.quit()
        running.stop()


def test_page_shows_a_denied_microphone_and_a_server_that_went_away(wav_and_reference):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from deepspeech2_serving.demo import DemoConfig, start

    running = start(DemoConfig(export_of(wav_and_reference[1]), port=0))
    driver = chromium(None)
    try:  # the user said no to the microphone
        driver.execute_cdp_cmd("Browser.setPermission", {"permission": {"name": "microphone"}, "setting": "denied",
                                                        "origin": running.url.rstrip("/")})
        driver.get(running.url)
        wait_for(driver, lambda s: s and s["state"] == "ready", "the page never connected")
        ActionChains(driver).click_and_hold(driver.find_element(By.ID, "talk")).release().perform()
        state = wait_for(driver, lambda s: s["errors"], "a denied microphone showed no error")
        assert state["errors"][0]["code"] == "mic_denied", state["errors"]
        assert "denied" in driver.find_element(By.ID, "error").text
        assert driver.find_element(By.ID, "error").is_displayed()

        running.stop()  # the server goes away
        running = None
        state = wait_for(driver, lambda s: any(e["code"] == "server_gone" for e in s["errors"]),
                         "the page did not notice the server went away")
        assert "went away" in driver.find_element(By.ID, "error").text
    finally:
        driver.quit()
        if running is not None:
            running.stop()


# ------------------------------------------------------------------------------------------- the WebSocket's limits

# A page of another origin that opens ds2-demo's WebSocket (the port in `?port=`) and records what happens.
PROBE_PAGE = b"""<!doctype html><title>elsewhere</title><script>
window.probe = { opened: false, messages: [], closed: null };
const ws = new WebSocket(`ws://127.0.0.1:${new URLSearchParams(location.search).get("port")}/ws`);
ws.onopen = () => { probe.opened = true; };
ws.onmessage = (event) => { probe.messages.push(JSON.parse(event.data).type); };
ws.onclose = (event) => { probe.closed = event.code; };
</script>"""


@pytest.fixture(scope="module")
def untrained_bundle(tmp_path_factory):
    """A CONFIG bundle, untrained (seeded), its features unnormalized."""
    features = FeatureConfig()
    keras.utils.set_random_seed(0)
    normalizer = Normalizer(np.zeros(features.dim, np.float32), np.ones(features.dim, np.float32), features)
    return save_bundle(tmp_path_factory.mktemp("untrained") / "model", build_model(CONFIG), CONFIG,
                       Vocabulary.english(), normalizer)


@contextlib.contextmanager
def page_elsewhere():
    """An HTTP server serving PROBE_PAGE on another port of 127.0.0.1 (another origin); yields its origin."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PROBE_PAGE)))
            self.end_headers()
            self.wfile.write(PROBE_PAGE)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_page_on_localhost_works_and_a_page_of_another_origin_is_refused(untrained_bundle):
    from selenium.webdriver.support.ui import WebDriverWait

    from deepspeech2_serving.demo import DemoConfig, start

    running = start(DemoConfig(export_of(untrained_bundle), port=0))
    driver = chromium(None)
    try:
        for url in (running.url, f"http://localhost:{running.port}/"):  # the same page under both names
            driver.get(url)
            state = wait_for(driver, lambda s: s and s["state"] in ("ready", "error"), f"{url} never connected")
            assert state["state"] == "ready" and not state["errors"], (url, state)
        with page_elsewhere() as origin:
            driver.get(f"{origin}/?port={running.port}")
            probe = WebDriverWait(driver, WAIT, poll_frequency=0.1).until(lambda d: d.execute_script(
                "return probe.closed !== null || probe.messages.length ? probe : false;"))
        assert probe == {"opened": False, "messages": [], "closed": 1006}  # 1006: the handshake failed (a 403)
    finally:
        driver.quit()
        running.stop()


def test_page_reconnects_after_its_idle_connection_was_closed(untrained_bundle, tmp_path):
    from selenium.webdriver.common.by import By

    from deepspeech2_serving.demo import DemoConfig, start

    wav = tmp_path / "clip.wav"
    save_wav(wav, speech_like_clip(1.2))
    running = start(DemoConfig(export_of(untrained_bundle), port=0, idle_seconds=3))
    driver = chromium(None)
    try:
        driver.get(running.url)
        wait_for(driver, lambda s: s and s["state"] == "ready", "the page never connected")
        state = wait_for(driver, lambda s: s["state"] == "idle", "the server never closed the idle connection")
        assert not state["errors"]  # not an error: the page says so and reconnects on the next use
        assert "nothing received for 3 s" in driver.find_element(By.ID, "model").text
        talk = driver.find_element(By.ID, "talk")
        assert talk.is_enabled() and talk.text == "Reconnect"

        driver.find_element(By.ID, "file").send_keys(str(wav))  # a file reconnects and is transcribed
        state = wait_for(driver, lambda s: len(s["finals"]) == 1, "the file got no transcript after reconnecting")
        assert state["finals"][0]["audio_seconds"] == pytest.approx(1.2, abs=0.05) and not state["errors"]

        wait_for(driver, lambda s: s["state"] == "idle", "the connection was not closed again")
        talk.click()  # so does the button
        state = wait_for(driver, lambda s: s["state"] in ("ready", "error"), "the button did not reconnect")
        assert state["state"] == "ready" and talk.text == "Hold to talk" and not state["errors"]
    finally:
        driver.quit()
        running.stop()
