"""Training-time data augmentation as TF graph ops, configured by the PaddlePaddle DeepSpeech2 JSON format.

The config is a JSON list applied in order; every entry fires with probability `prob`, drawn afresh for
every utterance in every epoch:

    [{"type": "speed",  "params": {"min_speed_rate": 0.9, "max_speed_rate": 1.1}, "prob": 0.5},
     {"type": "noise",  "params": {"noise_manifest_path": "data/tiny/noise/noise.jsonl",
                                   "min_snr_dB": 10, "max_snr_dB": 30}, "prob": 0.5},
     {"type": "specaugment", "params": {"F": 27, "T": 40, "n_freq_masks": 2, "n_time_masks": 2},
      "prob": 1.0}]

examples/augmentation.example.json is the recipe for the tiny corpus (its noise and RIR manifests come
from `deepspeech2.prepare.noise.prepare_noise`). Types and params are the seed's (data_utils/augmentor/):
`volume`, `speed`, `shift`, `noise`, `impulse`, `bayesian_normal`, `eq` (ours: a random smooth
equalizer) and `telephone` (ours: the G.711 phone line of `deepspeech2.data.telephone`) act on the
waveform; `specaugment` and `vtlp` (ours: vocal tract length perturbation) act on the features and always
run after every waveform entry, whatever their place in the list. Relative manifest paths resolve against
the current working directory, as in the seed.

Draws are stateless, a function of a (2,) int key `seed` alone (`draws.py`): the input pipeline keys each record
on (`PipelineConfig.seed`, epoch, input pipeline, position in the epoch).

Every component works on ONE utterance:
  waveform: `(wav, length, seed=None) -> (wav, length)`; wav float32 (samples,), length int32 scalar.
            Samples at `length` and beyond are padding: they are ignored, and zero in the output (`speed`
            returns exactly the new length, without padding).
  features: `(features, frame_length, seed=None) -> features`; features float32 (frames, dim), normalized
            (the input pipeline applies SpecAugment after the normalizer, as PaddleSpeech does).
`component.apply(x, length, u)` is the same with the draws given: `u` float32 (`component.num_draws`,),
uniform in [0, 1); `Augmentation` draws them for all its components at once.

Where we differ from the seed, on purpose:
  - `speed` resamples band-limited (FFT) instead of the seed's linear interpolation, which aliases when
    speeding up. FFT sizes are 7-smooth, so the drawn rate is quantized (within 0.25%, staying inside
    [min_speed_rate, max_speed_rate]) to the applied rate `n / m`; the length becomes
    `int(length / (n / m))`, as the seed's `int(length / rate)`.
  - `noise` loops a noise clip shorter than the utterance; the seed silently skipped such clips.
  - `impulse` keeps the length (the seed returned the full convolution, longer by the IR) by aligning on the
    IR's peak (the direct path), and rescales the result to the input's RMS, like the seed's
    `AudioSegment.convolve_and_normalize`, so an IR's arbitrary gain never changes the level. Each IR's
    tail is cut where 60 dB of its energy has decayed (`IMPULSE_TAIL_DB`).
  - `specaugment` draws widths in [0, F] and [0, T] inclusive (SpecAugment, Park et al. 2019, §2), masks
    only the valid frames, and time-warps with linear rather than bicubic interpolation. Like the seed's
    (PaddleSpeech's SpeechCollator: normalize, then `transform_feature`), it sees z-scored features, so its
    default fill, 0, is each bin's mean: a masked band is average, neither loud nor silent. (Masking raw
    log power with 0, far above its mean, and normalizing after made every mask a loud broadband band.)

The stages, a module each:
    config.py        the JSON list -> an `Augmentation` (`parse_augmentation`), and back (`Augmentation.to_config`)
    params.py        a component's JSON params: their names, their checks, its entry
    augmentation.py  `Augmentation`: the components in order, each fired by its coin, all draws from one op
    waveform.py      the waveform components, `volume` to `telephone`
    features.py      the feature components, `specaugment` and `vtlp`
    draws.py         stateless draws, and uniforms mapped to ranges and integers
    fft.py           the 7-smooth FFT sizes, the Fourier resampler (`speed`) and FFT convolution (`impulse`)
    banks.py         the noise and impulse clips a manifest lists, held in memory
"""
