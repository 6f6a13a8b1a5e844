"""Streaming recognition (DS2 §7): audio chunk + carried state -> the log-probs of the frames now final + new state.

A `ds2-streaming`-style model (unidirectional RNNs, optional row conv) is run chunk by chunk with the layers
and weights of the offline Keras model, so there is no second model. Each stage that looks at more than one
time step keeps just the inputs its next outputs still need, and emits an output as soon as all the inputs it
depends on have arrived:

    stage         window / stride (time)         kept between chunks                       lag
    STFT          window 320 / hop 160 samples   up to window - 1 samples                  one window
    conv i        kernel kt / stride st frames   up to kt - 1 input frames (all bins, all  kt - 1 inputs
                                                 channels); "same" starts with (kt-1)//2
                                                 zero frames and ends with kt//2 of them
    RNN i         one step                       the hidden state (BatchNormRNN's state)   none
    row conv      τ + 1 steps                    the last τ RNN outputs                    τ steps (DS2 §3.5)

Everything else is per frame: the normalizer (the training statistics, DS2 §7's fixed normalization for
online use), BatchNorm in inference (moving statistics: an affine map per channel), the clipped ReLUs, the FC
layers and the softmax. So the concatenated outputs of any chunking equal the offline model's log-probs on
the whole utterance, frame for frame (`tests/test_streaming.py` checks 10 ms to 1 s chunks). The last chunk
of a stream is marked `final`: the stages then add the zero frames the offline model sees past the end (the
conv's "same" padding, the row conv's τ zero steps) and emit the rest.

The state of a stream is one float32 vector (`StreamingModel.state_size`), so a batch of streams is a
`(streams, state_size)` tensor and a stateless server (stock TF Serving, the `stream_step` signature of
ds2-export) can carry it in the request and the response. All zeros is the state of a new stream: buffer
counts are stored relative to their starting value. `StreamingModel.layout` lists the segments.

The step is TensorFlow (like `deepspeech2.inference`): it runs the STFT of `featurize` and is exported as a
SavedModel signature. Streams in one batch are independent: each row has its own chunk length and state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from deepspeech2.features import FeatureConfig, Normalizer, featurize
from deepspeech2.geometry import same_padding
from deepspeech2.model_config import ModelConfig


@dataclass(frozen=True)
class Segment:
    """One part of the flat state vector of a stream."""

    name: str  # e.g. "audio", "conv0", "conv0_count", "rnn1", "row_conv", "last_label"
    shape: tuple[int, ...]  # per stream, without the batch axis
    offset: int  # first index in the state vector

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "offset": self.offset, "size": self.size}


def check_streamable(model_config: ModelConfig, feature_config: FeatureConfig) -> None:
    """Raise ValueError unless the model can run chunk by chunk with the same outputs as offline.

    Raises:
        ValueError: a bidirectional RNN or `utterance_cmn` (both need the whole utterance), MFCC features
            with frame context (their last frames need frames that come later), or a conv whose time stride
            exceeds its kernel (it would skip input frames that have not arrived yet).
    """
    if model_config.bidirectional:
        raise ValueError("a bidirectional model can't stream: its backward RNN needs the whole utterance; "
                         "use a unidirectional model with row convolution (the ds2-streaming preset)")
    if model_config.utterance_cmn:
        raise ValueError("a model with `utterance_cmn` can't stream: it subtracts the mean of the whole "
                         "utterance; train a streaming model without it")
    if feature_config.kind == "mfcc" and feature_config.mfcc_context:
        raise ValueError(f"MFCC features with `mfcc_context`={feature_config.mfcc_context} frames of context "
                         "can't stream; use linear or logmel features")
    for (kt, _), (st, _) in zip(model_config.conv_kernel_sizes, model_config.conv_strides):
        if st > kt:
            raise ValueError(f"a conv with time stride {st} over a kernel of {kt} frames can't stream; "
                             "use a time stride <= the kernel")


def is_streamable(model_config: ModelConfig, feature_config: FeatureConfig) -> bool:
    """True if `check_streamable` passes."""
    try:
        check_streamable(model_config, feature_config)
    except ValueError:
        return False
    return True


def _append(buffer, count, new, new_count):
    """Each row's kept inputs followed by its new ones, left-aligned, zeros beyond.

    Args:
        buffer: `(B, cap, ...)` kept inputs, the first `count[b]` valid.
        count: `(B,)` int32.
        new: `(B, T, ...)` new inputs, the first `new_count[b]` valid.
        new_count: `(B,)` int32.

    Returns:
        `(combined (B, cap + T, ...), total (B,))` with `total = count + new_count`, in `new`'s dtype: the state
        is stored as float32, the layers of a mixed-precision model compute in bfloat16 or float16.
    """
    cap = tf.shape(buffer)[1]
    joined = tf.concat([tf.cast(buffer, new.dtype), new], axis=1)
    i = tf.range(tf.shape(joined)[1])[None, :]  # (1, N)
    total = count + new_count
    valid = i < total[:, None]  # (B, N)
    source = tf.where(i < count[:, None], i, i - count[:, None] + cap)
    combined = tf.gather(joined, tf.where(valid, source, 0), batch_dims=1)
    return _zero_beyond(combined, valid), total


def _keep(combined, total, start, capacity: int):
    """`combined[b, start[b]:total[b]]` of each row, left-aligned in `(B, capacity, ...)`: the inputs the next
    outputs still need. Returns `(buffer, count)`."""
    count = total - start
    i = tf.range(capacity)[None, :]
    valid = i < count[:, None]
    index = tf.minimum(start[:, None] + i, tf.shape(combined)[1] - 1)
    kept = tf.gather(combined, tf.where(valid, index, 0), batch_dims=1)
    return _zero_beyond(kept, valid), count


def _zero_beyond(x, valid):
    """`x` `(B, T, ...)` with the steps where `valid` `(B, T)` is false set to zero."""
    mask = tf.reshape(tf.cast(valid, x.dtype), tf.concat([tf.shape(valid), tf.ones([x.shape.rank - 2], tf.int32)], 0))
    return x * mask


def _pad_time(x, least: int):
    """Zero steps after `x` `(B, T, ...)` so its time axis holds at least `least` steps (layers with a kernel or a
    scan need that many; the counts say which steps are real)."""
    missing = tf.maximum(least - tf.shape(x)[1], 0)
    return tf.pad(x, [[0, 0], [0, missing]] + [[0, 0]] * (x.shape.rank - 2))


def _append_zeros(x, count, final, steps: int):
    """For the rows with `final`, `steps` zero steps after their `count` valid ones (the padding the offline model
    sees past the end of the utterance). Returns `(x, count)`; `x` must be zero beyond `count` already."""
    if steps == 0:
        return x, count
    x = tf.pad(x, [[0, 0], [0, steps]] + [[0, 0]] * (x.shape.rank - 2))
    return x, count + tf.where(final, steps, 0)


def _windows(total, kernel: int, stride: int):
    """Complete windows (outputs) in `total` inputs: `max(0, (total - kernel) // stride + 1)`."""
    return tf.maximum((total - kernel) // stride + 1, 0)


class StreamingModel:
    """The chunked, stateful form of a unidirectional model: `step(chunk, state) -> (new log-probs, new state)`.

    Built from the model's own layers (`deepspeech2.model.build_model` names them frontend, fc_before{i},
    rnn{i}, row_conv, fc_after{i}, logits), so a bundle's weights stream as they are.
    """

    def __init__(self, model: keras.Model, model_config: ModelConfig, feature_config: FeatureConfig,
                 normalizer: Normalizer | None = None):
        """
        Args:
            model: from `build_model(model_config)` (weights loaded).
            model_config: its architecture.
            feature_config: the features it was trained on.
            normalizer: the training statistics (None: features unnormalized, as the model was trained).

        Raises:
            ValueError: the model can't stream (`check_streamable`).
        """
        check_streamable(model_config, feature_config)
        if model_config.feature_kind != feature_config.kind or model_config.feature_dim != feature_config.dim:
            raise ValueError(f"the model takes {model_config.feature_kind} features of {model_config.feature_dim} "
                             f"dims, `feature_config` gives {feature_config.kind} of {feature_config.dim}")
        self.model = model
        self.model_config = model_config
        self.feature_config = feature_config
        self.normalizer = normalizer
        c = model_config
        self.frontend = model.get_layer("frontend") if c.conv_filters else None
        self.fc_before = [model.get_layer(f"fc_before{i}") for i in range(len(c.fc_before_units))]
        self.rnns = [model.get_layer(f"rnn{i}") for i in range(c.rnn_layers)]
        self.row_conv = model.get_layer("row_conv") if c.row_conv_context else None
        self.fc_after = [model.get_layer(f"fc_after{i}") for i in range(len(c.fc_after_units))]
        self.logits = model.get_layer("logits")
        self.layout = self._make_layout()
        self.state_size = sum(s.size for s in self.layout)

    # ------------------------------------------------------------------------------------------- the state

    def _conv_inputs(self) -> list[tuple[int, int]]:
        """(frequency bins, channels) going into each conv."""
        c = self.model_config
        bins, channels, out = self.feature_config.dim, 1, []
        for filters, (_, kf), (_, sf) in zip(c.conv_filters, c.conv_kernel_sizes, c.conv_strides):
            out.append((bins, channels))
            if c.conv_padding == "same":
                bins = (bins + sf - 1) // sf
            else:
                bins = (bins - kf) // sf + 1
            channels = filters
        return out

    def _make_layout(self) -> list[Segment]:
        c, fc = self.model_config, self.feature_config
        shapes = [("audio", (fc.window_length - 1,)), ("audio_count", (1,))]
        for i, ((kt, _), (bins, channels)) in enumerate(zip(c.conv_kernel_sizes, self._conv_inputs())):
            shapes += [(f"conv{i}", (kt - 1, bins, channels)), (f"conv{i}_count", (1,))]
        for i, rnn in enumerate(self.rnns):
            shapes.append((f"rnn{i}", (rnn.state_size if hasattr(rnn, "state_size") else rnn.units,)))
        if c.row_conv_context:
            rnn_out = c.rnn_units
            shapes += [("row_conv", (c.row_conv_context, rnn_out)), ("row_conv_count", (1,))]
        shapes.append(("last_label", (1,)))
        layout, offset = [], 0
        for name, shape in shapes:
            layout.append(Segment(name, tuple(int(d) for d in shape), offset))
            offset += math.prod(shape)
        return layout

    def _initial_counts(self) -> dict[str, int]:
        """What each buffer holds when a stream starts: "same" convs start with (kt-1)//2 zero frames. The state
        stores counts minus these, so an all-zero vector is a new stream."""
        c = self.model_config
        counts = {"audio_count": 0, "row_conv_count": 0}
        for i, (kt, _) in enumerate(c.conv_kernel_sizes):
            counts[f"conv{i}_count"] = same_padding(kt)[0] if c.conv_padding == "same" else 0
        return counts

    def initial_state(self, batch: int = 1) -> np.ndarray:
        """The state of `batch` new streams: zeros, float32 `(batch, state_size)`."""
        return np.zeros((batch, self.state_size), np.float32)

    def layout_dict(self) -> dict:
        """The state layout as JSON-able data (export.json, README)."""
        return {"state_size": self.state_size, "dtype": "float32", "initial": "zeros",
                "counts_relative_to": self._initial_counts(), "segments": [s.to_dict() for s in self.layout]}

    def _unpack(self, state) -> dict:
        parts = tf.split(state, [s.size for s in self.layout], axis=1)
        initial = self._initial_counts()
        out = {}
        for seg, part in zip(self.layout, parts):
            if seg.name.endswith("_count") or seg.name == "last_label":
                value = tf.cast(tf.round(part[:, 0]), tf.int32) + initial.get(seg.name, 0)
            else:
                value = tf.reshape(part, tf.concat([tf.shape(state)[:1], seg.shape], 0))
            out[seg.name] = value
        return out

    def _pack(self, parts: dict):
        initial = self._initial_counts()
        flat = []
        for seg in self.layout:
            value = parts[seg.name]
            if seg.name.endswith("_count") or seg.name == "last_label":
                value = tf.cast(value - initial.get(seg.name, 0), tf.float32)[:, None]
            else:
                value = tf.reshape(tf.cast(value, tf.float32), [-1, seg.size])
            flat.append(value)
        return tf.concat(flat, axis=1)

    # ------------------------------------------------------------------------------------------- the step

    def step(self, waveforms, lengths, state, final):
        """Run one chunk of each stream.

        Args:
            waveforms: float32 `(batch, samples)` the new audio of each stream in [-1, 1], zero-padded.
            lengths: int32 `(batch,)` new samples per stream (0 is fine: nothing new, e.g. a bare `final`).
            state: float32 `(batch, state_size)` each stream's state (zeros for a new stream).
            final: bool `(batch,)` true on a stream's last chunk: flush the outputs waiting for right context.

        Returns:
            `(log_probs, output_lengths, new_state)`: float32 `(batch, steps, vocab_size)` the log-probs of the
            output steps that became final with this chunk (the first `output_lengths[b]` of each row are real),
            int32 `(batch,)`, and float32 `(batch, state_size)`. After a `final` chunk a row's state is spent:
            start the next utterance from zeros.
        """
        c, fc = self.model_config, self.feature_config
        waveforms = tf.convert_to_tensor(waveforms, tf.float32)
        lengths = tf.cast(lengths, tf.int32)
        final = tf.cast(final, tf.bool)
        s = self._unpack(tf.convert_to_tensor(state, tf.float32))
        new = {}

        # Audio -> the frames that lie completely inside what has arrived (features.num_frames' rule).
        audio, total = _append(s["audio"], s["audio_count"], _zero_beyond(waveforms, tf.sequence_mask(
            lengths, tf.shape(waveforms)[1])), lengths)
        audio = _pad_time(audio, fc.window_length)
        x, count = featurize(audio, total, fc, self.normalizer)  # (B, F, dim), zero beyond count
        new["audio"], new["audio_count"] = _keep(audio, total, count * fc.hop_length, fc.window_length - 1)

        if self.frontend is not None:
            x = x[..., None]  # (B, F, bins, 1)
            for i, ((kt, kf), (st, _)) in enumerate(zip(c.conv_kernel_sizes, c.conv_strides)):
                if c.conv_padding == "same":
                    x, count = _append_zeros(x, count, final, same_padding(kt)[1])
                x, total = _append(s[f"conv{i}"], s[f"conv{i}_count"], x, count)
                count = _windows(total, kt, st)
                new[f"conv{i}"], new[f"conv{i}_count"] = _keep(x, total, count * st, kt - 1)
                x = _pad_time(x, kt)
                if c.conv_padding == "same":
                    x = tf.pad(x, [[0, 0], [0, 0], list(same_padding(kf)), [0, 0]])
                x = self.frontend.conv_layer(i, x, count, training=False)  # (B, T', bins', C), zero beyond count
            shape = tf.shape(x)
            x = tf.reshape(x, [shape[0], shape[1], x.shape[2] * x.shape[3]])
        for layer in self.fc_before:
            x = layer(x, count, training=False)
        x = _pad_time(x, 1)  # a scan needs a step; rows with count 0 keep their state
        for i, rnn in enumerate(self.rnns):
            x, (new[f"rnn{i}"],) = rnn(x, count, initial_state=[s[f"rnn{i}"]], return_state=True, training=False)
        if self.row_conv is not None:
            tau = c.row_conv_context
            x, count = _append_zeros(x, count, final, tau)
            x, total = _append(s["row_conv"], s["row_conv_count"], x, count)
            count = _windows(total, tau + 1, 1)
            new["row_conv"], new["row_conv_count"] = _keep(x, total, count, tau)
            x = self.row_conv.window_outputs(_pad_time(x, tau + 1))
            x = _zero_beyond(x, tf.sequence_mask(count, tf.shape(x)[1]))
        for layer in self.fc_after:
            x = layer(x, count, training=False)
        log_probs = tf.nn.log_softmax(tf.cast(self.logits(x), tf.float32))
        new["last_label"] = last_label(log_probs, count, s["last_label"])
        return log_probs, count, self._pack(new)


def last_label(log_probs, lengths, previous):
    """The best-path label of each row's last valid step, or `previous` where a row has no new step (int32)."""
    ids = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (B, T)
    last = tf.gather(ids, tf.maximum(lengths - 1, 0), batch_dims=1)
    return tf.where(lengths > 0, last, previous)


def streaming_step(streaming: StreamingModel):
    """`StreamingModel.step` as one traced graph (`tf.function` with a fixed signature, traced once)."""
    return tf.function(streaming.step, input_signature=[
        tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None, streaming.state_size], tf.float32), tf.TensorSpec([None], tf.bool)])


__all__ = ["Segment", "StreamingModel", "check_streamable", "is_streamable", "last_label", "streaming_step"]
