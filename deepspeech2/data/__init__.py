"""The data a training run or an evaluation reads as it goes: manifests (`manifest.py`), TFRecord shards
(`shards.py`: written once by ds2-make-shards, read every epoch), the `tf.data` input pipeline (`pipeline.py`), the
augmentation it applies (`augment/`), and the telephone channel (`telephone.py`: an augmentation, and ds2-eval's
`--channel g711`). What runs once before training, and writes the corpora this reads, is `deepspeech2.prepare`.
"""
