"""Compute the per-bin feature mean/std over sampled training utterances -> mean_std.npz.

    ds2-compute-stats --manifest_paths data/tiny/train.jsonl --feature linear --out data/tiny/mean_std.npz

The .npz also carries the feature config (kind, sample rate, window, hop, ...): `ds2-train --mean_std` takes
its features from it.
"""

import sys

from absl import flags

from deepspeech2.audio import MAX_DURATION
from deepspeech2.features import KINDS, FeatureConfig
from deepspeech2.prepare.stats import NUM_SAMPLES, compute_mean_std

try:
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_compute_stats.py
    from _flags import default, from_flags

FLAGS = flags.FLAGS
flags.DEFINE_list("manifest_paths", None, "Comma-separated JSON-lines manifests to sample from.")
flags.DEFINE_string("out", None, "Output .npz (mean, std and the feature config).")
flags.DEFINE_integer("num_samples", NUM_SAMPLES, "Utterances to sample; 0 = all.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
flags.DEFINE_float("max_duration", MAX_DURATION, "Skip longer utterances (s), unread, as ds2-make-shards and ds2-train "
                   "do; 0: keep all.")
flags.DEFINE_enum("feature", default(FeatureConfig, "kind"), list(KINDS), "Feature kind.")
flags.DEFINE_integer("sample_rate", default(FeatureConfig, "sample_rate"), "Audio sample rate, Hz.")
flags.DEFINE_float("window_ms", default(FeatureConfig, "window_ms"), "STFT window, ms.")
flags.DEFINE_float("hop_ms", default(FeatureConfig, "hop_ms"), "STFT hop, ms.")
flags.DEFINE_integer("n_mels", default(FeatureConfig, "n_mels"), "Mel filters (logmel, mfcc).")
flags.DEFINE_integer("n_mfcc", default(FeatureConfig, "n_mfcc"), "Cepstra per frame (mfcc).")
flags.DEFINE_integer("mfcc_context", default(FeatureConfig, "mfcc_context"), "Frames of context each side (mfcc).")
flags.DEFINE_integer("pitch_bins", default(FeatureConfig, "pitch_bins"),
                     "Pitch-gram dims appended to each frame (0 = none; 32 for tonal languages).")
flags.DEFINE_float("pitch_fmin", default(FeatureConfig, "pitch_fmin"), "Lowest pitch in the pitch-gram, Hz.")
flags.DEFINE_float("pitch_fmax", default(FeatureConfig, "pitch_fmax"), "Highest pitch in the pitch-gram, Hz.")
flags.DEFINE_float("eps", default(FeatureConfig, "eps"), "Added to the power before the log: the features' floor "
                   "(digital silence sits at log(eps)). Raised to 1.7e-5 or 7.5e-5 (63-70 dB below a normalized "
                   "utterance's loudest bin), the tiny demo got worse on real recordings.")
flags.mark_flags_as_required(["manifest_paths", "out"])


def main(argv):
    if len(argv) > 1:
        sys.exit(f"ds2-compute-stats: error: unexpected arguments {argv[1:]}")
    try:
        config = from_flags(FeatureConfig, kind=FLAGS.feature)  # --sample_rate, --window_ms, ... by field name
        normalizer = compute_mean_std(FLAGS.manifest_paths, config, num_samples=FLAGS.num_samples or None,
                                      seed=FLAGS.seed, max_duration=FLAGS.max_duration or None)
        normalizer.save(FLAGS.out)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-compute-stats: error: {e}")
    print(f"wrote {FLAGS.out}: {config.kind} features, dim {config.dim}, {normalizer.num_utterances} "
          f"utterances, {normalizer.num_frames} frames, {normalizer.num_skipped} skipped (unreadable, shorter than a "
          f"window or longer than --max_duration; each is logged)")


def run():
    """absl's app.run with --help showing this module's docstring and flags (the console script gets here through
    its launcher in deepspeech2_cli, which has quieted TensorFlow first)."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
