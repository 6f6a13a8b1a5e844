from dataclasses import dataclass

import pytest

from deepspeech2.configs import from_dict
from deepspeech2.decode import DecoderConfig
from deepspeech2.features import FeatureConfig
from deepspeech2.model_config import ModelConfig


@dataclass(frozen=True)
class _Config:
    size: int = 1
    name: str = "a"


def test_from_dict_builds_the_dataclass():
    assert from_dict(_Config, {}) == _Config()
    assert from_dict(_Config, {"size": 3}) == _Config(size=3)


def test_from_dict_unknown_keys_are_an_error_naming_them_and_the_valid_ones():
    with pytest.raises(ValueError) as e:
        from_dict(_Config, {"size": 3, "zize": 4, "colour": "red"})
    assert str(e.value) == "unknown _Config keys ['colour', 'zize']; valid keys are ['name', 'size']"


@pytest.mark.parametrize("cls", [FeatureConfig, ModelConfig, DecoderConfig])
def test_every_config_reads_its_dict_through_the_one_helper(cls):
    assert cls.from_dict(cls().to_dict()) == cls()
    with pytest.raises(ValueError, match=rf"unknown {cls.__name__} keys \['no_such_field'\]; valid keys are"):
        cls.from_dict({"no_such_field": 1})
