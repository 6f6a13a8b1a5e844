"""The dev set at each epoch's end: greedy transcripts of the dev shards, scored as ds2-eval scores."""

from __future__ import annotations

from deepspeech2.data.pipeline import PipelineConfig, make_dataset
from deepspeech2.decode import greedy_decode
from deepspeech2.metrics import cer, wer


def dev_scores(eval_fn, shard_dirs, feature_config, normalizer, vocab, pipeline: PipelineConfig,
               num_examples: int = 3) -> tuple[float, float, list[tuple[str, str]]]:
    """Greedy-decode the shards; returns (WER, CER, a few (reference, hypothesis) pairs).

    Scored by `deepspeech2.metrics` as ds2-eval (`deepspeech2.evaluate.evaluate`, on manifests) and ds2-tune score,
    by `vocab.spaced`: for a vocabulary without a space (Mandarin) a word is a character, so the dev WER equals the
    dev CER.
    """
    refs, hyps = [], []
    ds = make_dataset(shard_dirs, feature_config, normalizer, None, pipeline, training=False, keep_text=True)
    for features, lengths, _, _, text in ds:
        outputs = eval_fn(features, lengths)
        for ids, ref in zip(greedy_decode(outputs["logits"], outputs["output_lengths"]), text.numpy()):
            refs.append(ref.decode("utf-8"))
            hyps.append(vocab.decode(ids))
    return (wer(refs, hyps, spaced=vocab.spaced), cer(refs, hyps, spaced=vocab.spaced),
            list(zip(refs, hyps))[:num_examples])
