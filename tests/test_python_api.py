"""docs/python-api.md's examples, run as doctests in a folder laid out as `make demo` leaves it (small untrained
models in its bundles' places, the tests' hello-world LM, a generated recording)."""

import dataclasses
import doctest
from pathlib import Path

import numpy as np

from deepspeech2.audio import save_wav, speech_like_clip
from deepspeech2.bundle import save_bundle
from deepspeech2.features import FeatureConfig, Normalizer
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.vocab import Vocabulary

from factories import modules_loaded_by

PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def _bundle(path: Path, model_config) -> None:
    config = FeatureConfig()
    rng = np.random.default_rng(0)
    normalizer = Normalizer(rng.normal(size=config.dim).astype(np.float32),
                            rng.uniform(1, 2, config.dim).astype(np.float32), config)
    save_bundle(path, build_model(model_config), model_config, Vocabulary.english(), normalizer)


def test_python_api_page_runs_as_written(tmp_path, monkeypatch, hello_world_lm):
    _bundle(tmp_path / "runs" / "tiny" / "model", TINY)
    _bundle(tmp_path / "runs" / "tiny-streaming" / "model", dataclasses.replace(TINY, bidirectional=False))
    lm = tmp_path / "data" / "tiny" / "lm" / "tiny3.arpa"
    lm.parent.mkdir(parents=True)
    lm.write_text(hello_world_lm.read_text())
    save_wav(tmp_path / "recording.wav", speech_like_clip(1.5, seed=3))
    monkeypatch.chdir(tmp_path)

    text = PAGE.read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {}, PAGE.name, str(PAGE), 0)
    assert len(test.examples) > 20, "docs/python-api.md lost its examples"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_importing_the_package_loads_no_tensorflow():
    """`import deepspeech2` names the calls of the page's first sections; only calling one loads TensorFlow."""
    code = "import deepspeech2\nassert callable(deepspeech2.load_bundle) and callable(deepspeech2.transcribe_files)\n"
    assert modules_loaded_by(code, ("tensorflow", "keras"), timeout=120) == []
