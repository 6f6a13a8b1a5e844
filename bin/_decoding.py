"""The decoder flags ds2-eval, ds2-infer, ds2-tune, ds2-serve and ds2-demo share, and the DecoderConfig they make
(for ds2-serve and ds2-demo only when one is given: `override`)."""

from absl import flags

from deepspeech2.decode import DecoderConfig

try:
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_x.py
    from _flags import default, from_flags

D = DecoderConfig
# The flags that replace an export's recorded decoder; --decode_workers isn't one: a server decodes in the
# request's thread.
OVERRIDE_FLAGS = ("decoder", "lm", "unigrams", "beam_size", "alpha", "beta", "cutoff_prob", "cutoff_top_n",
                  "token_min_logp", "beam_prune_logp", "hotwords", "hotword_weight")


def define_flags(kind: str | None) -> None:
    """Define the decoder flags in the calling command; `kind` None leaves out --decoder (ds2-tune: always beam)."""
    if kind is not None:
        flags.DEFINE_enum("decoder", kind, ["greedy", "beam"], "greedy (best path) or beam (prefix beam search, "
                          "with the KenLM model given by --lm).")
    flags.DEFINE_string("lm", None, "KenLM model (.arpa or binary; a binary needs its .unigrams.txt beside it).")
    flags.DEFINE_string("unigrams", None, "The LM's word list, if not <lm stem>.unigrams.txt.")
    flags.DEFINE_integer("beam_size", default(D, "beam_size"), "Beam size.")
    if kind is not None:
        flags.DEFINE_float("alpha", default(D, "alpha"), "LM weight (tune it with ds2-tune).")
        flags.DEFINE_float("beta", default(D, "beta"), "Word insertion bonus (tune it with ds2-tune).")
    flags.DEFINE_float("cutoff_prob", default(D, "cutoff_prob"), "DS2 pruning: cumulative probability per frame "
                       "(1: off).")
    flags.DEFINE_integer("cutoff_top_n", default(D, "cutoff_top_n"), "DS2 pruning: at most this many tokens per "
                         "frame.")
    flags.DEFINE_float("token_min_logp", default(D, "token_min_logp"), "Skip tokens below this log-probability.")
    flags.DEFINE_float("beam_prune_logp", default(D, "beam_prune_logp"), "Drop beams this far below the best one.")
    if kind is not None:  # ds2-tune parallelizes over grid points instead (its --num_workers), and tunes no hotwords
        flags.DEFINE_integer("decode_workers", default(D, "num_workers"), "Decoding processes; 0: one per CPU core.")
        flags.DEFINE_list("hotwords", [], "Words or phrases the beam search favours, comma-separated (\"zyxel,new "
                          "york\"); a phrase's words count one by one. Words the LM lacks work too (README: Hotwords).")
        flags.DEFINE_float("hotword_weight", default(D, "hotword_weight"), "Nats a hypothesis gains per hotword it "
                           "holds.")


def config(values: flags.FlagValues) -> DecoderConfig:
    """The DecoderConfig of the parsed flags, each field from the flag of its name (ValueError on bad
    combinations); --decoder, --lm, --unigrams and --decode_workers set `kind`, `lm_path`, `unigrams_path` and
    `num_workers`."""
    kind = values["decoder"].value if "decoder" in values else "beam"
    beam = kind == "beam"
    workers = values["decode_workers"].value if "decode_workers" in values else default(D, "num_workers")
    return from_flags(DecoderConfig, values=values, kind=kind, lm_path=values.lm if beam else None,
                      unigrams_path=values.unigrams if beam else None, num_workers=workers)


def override(values: flags.FlagValues) -> DecoderConfig | None:
    """ds2-serve and ds2-demo: the DecoderConfig of the decoder flags given on the command line, or None when none
    is given, so that the export's recorded decoder (assets.extra/decoder_config.json) is used.

    Raises:
        ValueError: --hotwords or --hotword_weight without --lm: they would replace the export's decoder (and its LM)
            with one without an LM, whose hotwords a stream's finals (greedy without an LM) never see.
    """
    if not any(values[name].present for name in OVERRIDE_FLAGS):
        return None
    if (values["hotwords"].present or values["hotword_weight"].present) and not values.lm:
        raise ValueError("--hotwords and --hotword_weight replace the export's recorded decoder, as every decoder flag "
                         "does: give --lm (with --alpha and --beta) too, or record the hotwords with ds2-export")
    return config(values)
