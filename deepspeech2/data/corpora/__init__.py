"""Corpus importers, lhotse style: `prepare_<corpus>(corpus_dir, output_dir, *, num_workers=2, splits=None)`
reads a corpus in its distributed on-disk layout and writes, per split, `output_dir/<split>.jsonl` (a
manifest of 16 kHz mono WAV utterances with normalized text) and `output_dir/<split>.report.json` (what
was skipped and why, and counts of what the split leaves out by definition). Audio that isn't already a
16 kHz mono 16-bit WAV is converted once into `output_dir/wav/`. Running an importer again reuses those
conversions and rewrites nothing unchanged.
"""

from deepspeech2.data.corpora.aishell import normalize_aishell, prepare_aishell
from deepspeech2.data.corpora.chime4 import prepare_chime4
from deepspeech2.data.corpora.librispeech import prepare_librispeech
from deepspeech2.data.corpora.tedlium import normalize_tedlium, prepare_tedlium
from deepspeech2.data.corpora.voxforge import prepare_voxforge
from deepspeech2.data.corpora.wsj import normalize_wsj, prepare_wsj

__all__ = [
    "normalize_aishell",
    "normalize_tedlium",
    "normalize_wsj",
    "prepare_aishell",
    "prepare_chime4",
    "prepare_librispeech",
    "prepare_tedlium",
    "prepare_voxforge",
    "prepare_wsj",
]
