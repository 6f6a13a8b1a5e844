"""Decoding CTC outputs to text: best path, and beam search with a KenLM n-gram LM (DS2 §3.8, §7.3).

Decoding takes log-probabilities and output lengths only: it never imports the model, the input pipeline,
the trainer or TensorFlow, so ds2-serve and ds2-demo decode with it.

    greedy.py  `greedy_decode`: best path, vectorised over the batch; `GreedyStream`: the same, chunk by
               chunk; `ids_to_text`: label ids -> transcript, the one join
    beam.py    `DecoderConfig`, `Decoder` (greedy or pyctcdecode beam search, with or without an LM, a
               persistent worker pool), `BeamStream` (the same search fed chunk by chunk, for streaming)
    prune.py   `prune_log_probs` (DS2 §7.3), `candidate_frames`: each frame's tokens the search tries
    hotwords.py  `Hotwords`, `normalize_hotwords`: the words and phrases the search favours
    search.py  `PrefixSearch`: the prefix beam search over frames, its state kept between calls (pyctcdecode's
               loop and scoring)
    lm.py      `LMConfig`, `build_lm`: text -> normalized corpus -> lmplz -> build_binary -> unigram list
    tune.py    `TuneConfig`, `tune`, `plot_error_surface`: the alpha x beta grid search
"""

from deepspeech2.decode.beam import BeamStream, Decoder, DecoderConfig
from deepspeech2.decode.prune import CUTOFF_PROB, CUTOFF_TOP_N, prune_log_probs
from deepspeech2.decode.greedy import GreedyStream, greedy_decode, ids_to_text

__all__ = ["BeamStream", "CUTOFF_PROB", "CUTOFF_TOP_N", "Decoder", "DecoderConfig", "GreedyStream", "greedy_decode", "ids_to_text",
           "prune_log_probs"]
