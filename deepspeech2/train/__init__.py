"""Training: one `strategy.run` loop for every strategy (one device, all local GPUs, many machines).

Keras 3's `Model.fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585), so this is a
custom loop: tf.data batches -> `strategy.run(replica step)` -> CTC -> gradients -> a Keras optimizer's
`update_step`, with `tf.train.CheckpointManager` checkpoints (model, optimizer, step, epoch and position in
the epoch) and `tf.summary` for TensorBoard. The flax `main.py` pattern: `bin/ds2_train.py` parses flags
into a `TrainConfig` (`config.py`) and calls `train(config)` (`trainer.py`).

The step is synchronous SGD done by hand rather than through `optimizer.apply`, because in Keras 3.15 the
optimizer clips `global_clipnorm` on each replica's partial gradient before it sums them, and
`LossScaleOptimizer` decides "finite" from replica 0's gradients alone. Here every replica all-reduces the
gradients itself, so all of them hold the global batch's gradient; its true global norm is clipped and
logged; and the update is applied, or skipped on every replica together (BatchNorm moving statistics
restored too), from one all-reduced decision. Sequence-wise BN is synchronized across replicas
(`deepspeech2.model.layers.cross_replica_sum`), so N replicas train the model one device would train on
the same global batch.

Work directory layout:
    checkpoints/   tf.train checkpoints, every `checkpoints.every_steps` and at each epoch end, each with a
                   ckpt-N.data_order.json beside it: what fixes the order of the epoch's batches (`data_order`),
                   compared on resume. Every worker of a cluster resumes from here; the others write theirs to
                   workertemp_<task id>/, which nobody reads (TF's multi-worker checkpoint layout)
    model/         the bundle of the epoch with the best dev WER (DS2 §5), or CER for a vocabulary without
                   spaces (Mandarin, DS2 §6.2; its WER counts characters, so the two agree); the last epoch
                   without dev data
    last/          the bundle of the last finished epoch, or of the step `max_train_minutes` ended on
                   (`deepspeech2.bundle`)
    averaged/      with `average_epochs` N > 1: the bundle of the mean weights of the last N epochs (ESPnet's
                   and PaddleSpeech's checkpoint averaging); it becomes model/ too when it scores better on dev.
                   epochs/ holds the N epochs' weights it is made from; average.json its dev WER/CER.
    tensorboard/   train/ and dev/ event files
    epochs.json    one record per finished epoch: mean train loss, dev WER/CER, time, and the loss of each
                   block of `log_every_steps` steps within it (`loss_curve`: [epochs done, loss]; the PNG);
                   a run stopped by `max_train_minutes` adds one for its unfinished epoch ("partial": true).
                   With `ema_decay`, model/ and last/ hold the weights' moving average (kept in the
                   checkpoints too), dev's scores are its, and dev_wer_trained/dev_cer_trained the weights' as
                   trained
    learning_curve.png

The stages, a module each:
    config.py          `TrainConfig`: everything one run needs, saved in the model bundle, with the optimizer and
                       schedule, the checkpoints and a benchmark's limits each in a config of its own
    trainer.py         `train` and `Trainer`: set-up, restore, the replica step, the epoch loop, the epoch's end
    schedule.py        the optimizer and its learning rate: warm-up, then a per-epoch anneal
    ctc.py             the CTC loss through TF's kernels (cuDNN's with a fallback for long transcripts)
    strategy.py        one device, all local GPUs or a cluster; who is the chief; SIGTERM across workers
    precision.py       what `--mixed_precision auto` stands for on this machine
    resume.py          the newest readable checkpoint, and the records beside each one checked on resume: what
                       orders an epoch's batches, the model's config; the workers of a cluster agree
    averaging.py       the weights' moving average (`ema_decay`) and the mean of the last epochs' (`average_epochs`)
    summaries.py       TensorBoard's scalars and examples, the log lines, the benchmark line
    dev.py             the dev set's greedy WER/CER at each epoch's end
    learning_curve.py  epochs.json, read back on resume and drawn as learning_curve.png
"""
