"""ModelConfig: the architecture of one DeepSpeech model, and the named presets.

A model is: conv front end -> optional FC layers -> RNN stack -> optional row conv -> optional FC layers ->
dense to `vocab_size` (DS2 Fig. 1). Kernel and stride pairs are written (time, frequency).

No TensorFlow or Keras: `data/`, the decoders and the servers read a model's config without the model code (which
is `deepspeech2.model`); its lengths are `deepspeech2.geometry`'s.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from deepspeech2 import configs
from deepspeech2.feature_config import KINDS as FEATURE_KINDS
from deepspeech2.feature_config import MFCC_CONTEXT, N_MFCC, NUM_LINEAR_BINS
from deepspeech2.geometry import conv_stack_output_length
from deepspeech2.vocab import ENGLISH_CHARS

RNN_TYPES = ("gru", "lstm", "rnn", "cudnn_gru")
CONV_PADDINGS = ("valid", "same")
ENGLISH_VOCAB_SIZE = 1 + len(ENGLISH_CHARS)  # 29: CTC blank (id 0), space, apostrophe, a-z


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyper-parameters. Saved as JSON next to every checkpoint and export."""

    feature_kind: str = "linear"  # the features the model is built for (FeatureConfig.kind); the trainer
    # refuses normalizer stats of another kind or size rather than silently resizing the input layer
    feature_dim: int = NUM_LINEAR_BINS  # input features per frame (161 linear-spectrogram bins)
    utterance_cmn: bool = False  # subtract each utterance's mean frame first (cepstral mean normalization:
    # a fixed channel or voice colouring goes); needs the whole utterance, so such a model can't stream
    utterance_cvn: bool = False  # with `utterance_cmn`, also divide each bin by its std over the utterance
    # (Kaldi's --norm-vars): each utterance's dynamic range per bin made the same
    vocab_size: int = ENGLISH_VOCAB_SIZE  # softmax size, CTC blank included (blank is id 0)
    conv_filters: tuple[int, ...] = (32, 32)  # output channels of each 2-D conv; () = no conv front end
    conv_kernel_sizes: tuple[tuple[int, int], ...] = ((3, 3), (3, 3))  # (time, freq) kernel per conv
    conv_strides: tuple[tuple[int, int], ...] = ((2, 2), (2, 2))  # (time, freq) stride per conv
    conv_padding: str = "valid"  # "valid" (no padding) or "same" (zero pad (k-1)//2 before, k//2 after)
    fc_before_units: tuple[int, ...] = ()  # clipped-ReLU FC layers between front end and RNNs (DS1)
    rnn_type: str = "gru"  # "gru", "lstm", "rnn" (BatchNormRNN cells) or "cudnn_gru" (keras.layers.GRU)
    rnn_layers: int = 3  # number of recurrent layers
    rnn_units: int = 512  # hidden units per direction
    bidirectional: bool = False  # two directions, outputs summed (DS2 §3.2)
    rnn_batch_norm: bool = True  # sequence-wise BN on RNN input projections (DS2 §3.2 eq. 4); "cudnn_gru" has none
    rnn_dropout: float = 0.0  # dropout rate on each RNN layer's output, in training only (what the next layer
    # and the output layer see); against a small corpus learned by heart
    row_conv_context: int = 0  # future steps the row conv sees (DS2 §3.5); 0 = no row conv
    fc_after_units: tuple[int, ...] = ()  # clipped-ReLU FC layers between RNNs and the output layer
    fc_dropout: float = 0.0  # dropout rate after each FC layer (DS1 uses 0.05)

    def __post_init__(self):
        for name in ("feature_dim", "vocab_size", "rnn_layers", "rnn_units"):
            _check_positive_int(name, getattr(self, name))
        if self.feature_kind not in FEATURE_KINDS:
            raise ValueError(f"`feature_kind` must be one of {FEATURE_KINDS}, got {self.feature_kind!r}")
        if self.utterance_cvn and not self.utterance_cmn:
            raise ValueError("`utterance_cvn` scales what `utterance_cmn` centres: set `utterance_cmn` too")
        if self.vocab_size < 2:
            raise ValueError(f"`vocab_size` must be >= 2 (blank plus one symbol), got {self.vocab_size!r}")
        n_conv = len(self.conv_filters)
        for name in ("conv_kernel_sizes", "conv_strides"):
            pairs = getattr(self, name)
            if len(pairs) != n_conv:
                raise ValueError(f"`{name}` needs one (time, freq) pair per conv layer ({n_conv}, from "
                                 f"`conv_filters`), got {pairs!r}")
            for pair in pairs:
                if len(pair) != 2 or not all(isinstance(v, int) and v > 0 for v in pair):
                    raise ValueError(f"`{name}` entries must be (time, freq) positive ints, got {pair!r}")
        if not 0 <= n_conv <= 3:
            raise ValueError(f"`conv_filters` must list 0 to 3 conv layers (DS2 Table 3), got {self.conv_filters!r}")
        for name in ("conv_filters", "fc_before_units", "fc_after_units"):
            for units in getattr(self, name):
                _check_positive_int(name, units)
        if self.conv_padding not in CONV_PADDINGS:
            raise ValueError(f"`conv_padding` must be one of {CONV_PADDINGS}, got {self.conv_padding!r}")
        if self.rnn_type not in RNN_TYPES:
            raise ValueError(f"`rnn_type` must be one of {RNN_TYPES}, got {self.rnn_type!r}")
        if isinstance(self.row_conv_context, bool) or not isinstance(self.row_conv_context, int) \
                or self.row_conv_context < 0:
            raise ValueError(f"`row_conv_context` must be a non-negative int, got {self.row_conv_context!r}")
        if self.row_conv_context and self.bidirectional:
            raise ValueError("`row_conv_context` > 0 is for unidirectional models (DS2 §3.5); got "
                             f"row_conv_context={self.row_conv_context} with bidirectional=True")
        for name in ("fc_dropout", "rnn_dropout"):
            rate = getattr(self, name)
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1), got {rate!r}")
        if self.frontend_output_dim < 1:
            raise ValueError(f"the conv front end leaves no frequency bins for `feature_dim`={self.feature_dim}; "
                             "use smaller kernels/strides or `conv_padding`='same'")

    @property
    def time_stride(self) -> int:
        """Input frames per output step (the product of the conv time strides)."""
        return math.prod(stride for stride, _ in self.conv_strides)

    @property
    def frontend_output_dim(self) -> int:
        """Features per step after the conv front end: frequency bins left x channels of the last conv."""
        if not self.conv_filters:
            return self.feature_dim
        bins = conv_stack_output_length(self.feature_dim, [k for _, k in self.conv_kernel_sizes],
                                        [s for _, s in self.conv_strides], self.conv_padding)
        return bins * self.conv_filters[-1]

    def to_dict(self) -> dict:
        """The fields as a dict, ready for `json.dumps` (which writes the tuples as lists)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """Inverse of `to_dict`. Raises ValueError on keys that are not fields."""
        values = dict(values)  # JSON gives lists where the fields hold tuples
        for name in ("conv_kernel_sizes", "conv_strides"):
            if name in values:
                values[name] = tuple(tuple(pair) for pair in values[name])
        for name in ("conv_filters", "fc_before_units", "fc_after_units"):
            if name in values:
                values[name] = tuple(values[name])
        return configs.from_dict(cls, values)


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive int, got {value!r}")


# Fast CPU tests: one small conv and two small bidirectional GRUs.
TINY = ModelConfig(
    conv_filters=(4,),
    conv_kernel_sizes=((3, 5),),
    conv_strides=((2, 4),),  # 161 bins -> 40 bins x 4 channels = 160 features per step
    rnn_layers=2,
    rnn_units=16,
    bidirectional=True,
)

# The benchmark workload: PaddleSpeech's DS2 front end (two 3x3 convs, stride 2 in time and frequency,
# 32 channels: 161 bins -> 80 -> 39, 39 x 32 = 1248 features per step, 4x fewer steps) and 3 GRU-512.
DS2_SMALL = ModelConfig()

# DS2's English model, the one the paper reports all its English results with (DS2 §3.x, Table 11 and
# the text after it: "the 100 million parameter RNN model"): 3 layers of 2-D convolution and 7
# bidirectional layers of *simple* clipped-ReLU recurrence with BatchNorm, then the output layer. Its GRU
# models had fewer recurrent layers (Table 11's GRU: 3 bidirectional layers after 1 conv layer); 7
# bidirectional GRU-1760 layers would be 264 M parameters, a model the paper never trained. The front end
# is Table 3's best 2-D one (41x11, 21x11, 21x11 filters written frequency x time in the paper; 32, 32,
# 96 channels). The paper's 100 M model strides 3 in time and outputs bigrams (Table 11); we keep
# characters (unigrams), which need the smaller time stride of 2 (DS2 §3.6). The paper does not list the
# units; 1880 per direction gives 100.6 M parameters here (each direction has its own input weights).
DS2_PAPER_EN = ModelConfig(
    conv_filters=(32, 32, 96),
    conv_kernel_sizes=((11, 41), (11, 21), (11, 21)),
    conv_strides=((2, 2), (1, 2), (1, 2)),
    conv_padding="same",
    rnn_type="rnn",
    rnn_layers=7,
    rnn_units=1880,
    bidirectional=True,
)

# The paper's other English model at that scale (Table 11, "GRU"): one 2-D convolution (Table 3's first layer)
# and 3 bidirectional GRU layers. Its GRU layers run as one fused cuDNN kernel each on a GPU, where
# ds2-paper-en's clipped-ReLU layers run as time loops (cuDNN's ReLU RNN has no clip). Table 11 sizes it like the
# RNN model; 1600 units per direction give 102 M parameters here.
DS2_PAPER_EN_GRU = ModelConfig(
    conv_filters=(32,),
    conv_kernel_sizes=((11, 41),),
    conv_strides=((2, 2),),
    conv_padding="same",
    rnn_type="gru",
    rnn_layers=3,
    rnn_units=1600,
    bidirectional=True,
)

# Streamable: unidirectional GRUs, and a row conv that looks 3 steps (120 ms at stride 4) ahead
# instead of a backward RNN (DS2 §3.5).
DS2_STREAMING = ModelConfig(
    rnn_layers=5,
    rnn_units=1024,
    row_conv_context=3,
)

# Mozilla's DeepSpeech 1 notebook (../shared/seeds, `BiRNN`): 26 MFCCs with +-9 frames of context (494
# dims) into 3 clipped-ReLU FC layers of 494, 494 and 988 units (`n_hidden_1/2 = n_input + 2 * n_input *
# n_context`, `n_hidden_3 = 2 * n_cell_dim`), one bidirectional LSTM with a 494-unit cell, one more FC
# layer of 494, the softmax; dropout 0.05 after each FC layer; no conv and no batch norm. One difference
# on purpose: our bidirectional layers sum the two directions (DS2 §3.2) where the notebook concatenates
# them, so the FC layer after the LSTM sees 494 inputs, not 988.
DS1 = ModelConfig(
    feature_kind="mfcc",
    feature_dim=N_MFCC * (2 * MFCC_CONTEXT + 1),
    conv_filters=(),
    conv_kernel_sizes=(),
    conv_strides=(),
    fc_before_units=(494, 494, 988),
    rnn_type="lstm",
    rnn_layers=1,
    rnn_units=494,
    bidirectional=True,
    rnn_batch_norm=False,
    fc_after_units=(494,),
    fc_dropout=0.05,
)

PRESETS = {"tiny": TINY, "ds2-small": DS2_SMALL, "ds2-paper-en": DS2_PAPER_EN, "ds2-paper-en-gru": DS2_PAPER_EN_GRU,
           "ds2-streaming": DS2_STREAMING, "ds1": DS1}


def preset(name: str) -> ModelConfig:
    """The preset called `name` (one of `PRESETS`), for command lines."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset `name`={name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]


def model_name(model: ModelConfig) -> str:
    """The preset name of `model`, or a description of its front end for messages."""
    name = next((k for k, v in PRESETS.items() if v == model), None)
    return name or f"custom (time stride {model.time_stride})"


def load_model_config(spec: str) -> ModelConfig:
    """A model for command lines: a preset name (one of `PRESETS`), the path of a model_config.json (as
    written next to checkpoints and in bundles; `ModelConfig.from_dict`), or a folder holding one.

    Raises:
        FileNotFoundError: `spec` looks like a path (ends in .json or has a folder) and doesn't exist, or is a
            folder without a model_config.json.
        ValueError: neither a preset nor a readable ModelConfig JSON file.
    """
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if path.is_dir():  # a bundle or a training workdir
        path = path / "model_config.json"
        if not path.is_file():
            raise FileNotFoundError(f"`model`={spec!r} is a folder without a model_config.json")
    if path.is_file():
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"`model`={spec!r} is not a JSON file: {e}") from None
        if not isinstance(values, dict):
            raise ValueError(f"`model`={spec!r} must hold a JSON object of ModelConfig fields, got "
                             f"{type(values).__name__}")
        try:
            return ModelConfig.from_dict(values)
        except (ValueError, TypeError) as e:
            raise ValueError(f"`model`={spec!r}: {e}") from None
    if path.suffix == ".json" or len(path.parts) > 1:
        raise FileNotFoundError(f"model config `{spec}` does not exist; give a model_config.json or one of the "
                                f"presets {sorted(PRESETS)}")
    raise ValueError(f"unknown `model`={spec!r}; give one of the presets {sorted(PRESETS)} or the path of a "
                     "model_config.json")
