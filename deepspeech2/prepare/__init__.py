"""Offline preparation: everything that runs once, before training, and writes files (`ds2-prepare`,
`ds2-compute-stats`). The online input pipeline that reads them every epoch is `deepspeech2.data`.

Each corpus has `prepare_<module>(...)`, lhotse's shape: it writes its manifests into an output folder it is given,
returns them, and is safe to run again (finished work is reused).

Importers of corpora as distributed (`prepare_<corpus>(corpus_dir, output_dir, *, num_workers=2, splits=None)`;
`output_dir/<split>.jsonl` and `output_dir/<split>.report.json`, what was skipped and why):
    librispeech.py voxforge.py aishell.py wsj.py chime4.py tedlium.py
    folder.py          your own recordings: audio with transcripts beside, or a table (Common Voice, DeepSpeech)
    importer.py        what they share: finding the layout, converting audio once, normalizing, reporting
    download.py        files fetched over HTTP(S), resumed, checked against a published checksum; tarballs unpacked

The synthetic corpora (the demo's tiny corpus, the held-out festival voices, the LM text builders) are a package of
their own above the library, `deepspeech2_synthetic` (synthetic/), which nothing here imports.

And for the pipeline's inputs:
    noise.py           coloured noise, babble and room impulse responses for the `noise` and `impulse` augmentation
    validate.py        every manifest line checked as make-shards, compute-stats and training will use it
    stats.py           the normalizer's per-bin mean and std
"""
