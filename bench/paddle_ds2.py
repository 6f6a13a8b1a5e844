"""PaddleSpeech's DeepSpeech2 training step on the ds2-small workload, in PaddlePaddle (prints figures; not a test).

The reference point for `bench/train.py --paddle`; runs under `.venv-paddle/bin/python` (`make bench-paddle-venv`)
and imports only paddle, numpy and the standard library: PaddleSpeech itself is not installed, its model is rebuilt
here from its source, layer for layer (PaddlePaddle/PaddleSpeech, develop branch, read at commit d11893ae of
paddlespeech/s2t/models/ds2/deepspeech2.py, the r1.x DS2 that replaced the old ConvStack/RNNStack model):

  paddlespeech/s2t/models/ds2/conv.py         Conv2dSubsampling4Pure: on (B, 1, T, D), Conv2D(1, 32, 3, stride 2)
                                              -> ReLU -> Conv2D(32, 32, 3, stride 2) -> ReLU, no padding, with bias,
                                              no normalization (its parent Conv2dSubsampling4, in
                                              paddlespeech/s2t/modules/subsampling.py, also makes a Linear(1248, 32)
                                              `out` that Pure's forward never calls: built here too, it holds
                                              parameters but gets no gradient); (B, T', 32 x 39 = 1248)
  paddlespeech/s2t/models/ds2/deepspeech2.py  CRNNEncoder: per layer nn.GRU(direction='forward', num_layers=1) given
                                              the lengths, then nn.LayerNorm(512); num_fc_layers 0 (the asr0
                                              configs); DeepSpeech2Model: encoder -> CTCDecoder
  paddlespeech/s2t/modules/ctc.py             CTCDecoderBase: Dropout(0.0) -> ctc_lo = nn.Linear(512, 29) -> CTCLoss
  paddlespeech/s2t/modules/loss.py            CTCLoss: nn.CTCLoss(blank 0, reduction 'sum') on (T, B, V) logits
                                              (warp-ctc, softmax inside), int32 labels, / batch size
  paddlespeech/s2t/exps/deepspeech2/model.py  DeepSpeech2Trainer: Adam(ExponentialDecay(lr 5e-4, 0.93),
                                              weight_decay=L2Decay(1e-6), grad_clip=ClipGradByGlobalNorm(3.0))
                                              (examples/aishell/asr0/conf/deepspeech2_online.yaml); a step is
                                              loss = model(...); float(loss); loss.backward(); step(); clear_grad()

The workload is bench/train.py's, not the asr0 recipe's size: 161 linear bins, 3 GRU-512 layers (asr0: 5 LSTM-1024),
29 outputs, batch 16 x 500 frames, random labels of length 60; inputs from the same seeded numpy generator.
fp32 (Paddle's default), dygraph (how PaddleSpeech trains), Paddle's default CPU kernels (FLAGS_use_onednn off).

Threads: Paddle sets OMP_NUM_THREADS=1 at import unless it is set already, so out of the box it computes on one
core. This script uses every core (`--threads`, default os.cpu_count()): it sets OMP_NUM_THREADS before importing
paddle (Paddle's own knob; it then prints a warning about it, dropped here) and calls
paddle.base.core.set_num_threads (MKL's and OpenMP's thread count). `--threads 1` is Paddle's default.

    .venv-paddle/bin/python bench/paddle_ds2.py --steps 10

The last line printed is one JSON object (sent_per_s, step_ms, steps, paddle_version, threads, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import statistics
import sys
import time
import warnings

BATCH = 16
SECONDS = 5.0
FRAMES = 500
FEATURE_DIM = 161
LABEL_LENGTH = 60
VOCAB_SIZE = 29  # CTC blank (id 0), space, apostrophe, a-z
RNN_LAYERS = 3
RNN_UNITS = 512
CONV_CHANNELS = 32


def _import_paddle(threads: int):
    """`import paddle` on `threads` threads, without its start-up warnings (the ccache one and the one about
    OMP_NUM_THREADS > 1); anything else it prints still shows."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("GLOG_minloglevel", "2")  # C++ INFO and WARNING logs
    captured = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(captured):
        warnings.filterwarnings("ignore", message="No ccache found")
        import paddle
    for line in captured.getvalue().splitlines():
        if "OMP_NUM_THREADS" not in line:
            print(line, file=sys.stderr)
    paddle.base.core.set_num_threads(threads)
    paddle.set_device("cpu")
    return paddle


def build(paddle):
    """DeepSpeech2Model for this workload, as PaddleSpeech builds it (see the module docstring)."""
    from paddle import nn

    class Conv2dSubsampling4Pure(nn.Layer):
        def __init__(self, idim: int, odim: int):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2D(1, odim, 3, 2), nn.ReLU(), nn.Conv2D(odim, odim, 3, 2), nn.ReLU())
            # Conv2dSubsampling4's output layer: built (parameters), never called
            self.out = nn.Sequential(nn.Linear(odim * (((idim - 1) // 2 - 1) // 2), odim))
            self.output_dim = ((idim - 1) // 2 - 1) // 2 * odim

        def forward(self, x, x_len):
            x = x.unsqueeze(1)  # (b, c=1, t, f)
            x = self.conv(x)
            x = x.transpose([0, 2, 1, 3]).reshape([0, 0, -1])
            x_len = ((x_len - 1) // 2 - 1) // 2
            return x, x_len

    class CRNNEncoder(nn.Layer):
        def __init__(self, feat_size, num_rnn_layers, rnn_size):
            super().__init__()
            self.conv = Conv2dSubsampling4Pure(feat_size, CONV_CHANNELS)
            self.rnn = nn.LayerList()
            self.layernorm_list = nn.LayerList()
            i_size = self.conv.output_dim
            for i in range(num_rnn_layers):
                self.rnn.append(nn.GRU(input_size=i_size if i == 0 else rnn_size, hidden_size=rnn_size,
                                       num_layers=1, direction="forward"))
                self.layernorm_list.append(nn.LayerNorm(rnn_size))
            self.output_dim = rnn_size

        def forward(self, x, x_lens):
            x, x_lens = self.conv(x, x_lens)
            for rnn, norm in zip(self.rnn, self.layernorm_list):
                x, _ = rnn(x, None, x_lens)
                x = norm(x)
            return x, x_lens

    class CTCDecoder(nn.Layer):
        def __init__(self, odim, enc_n_units):
            super().__init__()
            self.dropout = nn.Dropout(0.0)
            self.ctc_lo = nn.Linear(enc_n_units, odim)
            self.loss = nn.CTCLoss(blank=0, reduction="sum")

        def forward(self, hs_pad, hlens, ys_pad, ys_lens):
            logits = self.ctc_lo(self.dropout(hs_pad))
            logits = logits.transpose([1, 0, 2])  # warp-ctc wants (T, B, V) and does the softmax itself
            loss = self.loss(logits, ys_pad.astype(paddle.int32), hlens, ys_lens)
            return loss / hs_pad.shape[0]  # batch_average

    class DeepSpeech2Model(nn.Layer):
        def __init__(self):
            super().__init__()
            self.encoder = CRNNEncoder(FEATURE_DIM, RNN_LAYERS, RNN_UNITS)
            self.decoder = CTCDecoder(VOCAB_SIZE, self.encoder.output_dim)

        def forward(self, audio, audio_len, text, text_len):
            eouts, eouts_len = self.encoder(audio, audio_len)
            return self.decoder(eouts, eouts_len, text, text_len)

    return DeepSpeech2Model()


def step_flops(model, steps: int) -> float:
    """Multiply-add FLOPs of one training step, counted as deepspeech2.geometry.forward_flops counts ours: the
    convs, the GRUs' input and recurrent matmuls and the output layer, 3x the forward pass, from this model's
    weights' shapes (`steps`: GRU time steps)."""
    flops, frames, bins = 0.0, FRAMES, FEATURE_DIM
    for layer in model.encoder.conv.conv:
        if hasattr(layer, "weight"):  # (out, in, kt, kf)
            out_c, in_c, kt, kf = layer.weight.shape
            frames, bins = (frames - kt) // layer._stride[0] + 1, (bins - kf) // layer._stride[1] + 1
            flops += 2 * frames * bins * out_c * in_c * kt * kf
    for rnn in model.encoder.rnn:
        for name, weight in rnn.named_parameters():
            if name.startswith("weight_"):  # weight_ih (3H, I) and weight_hh (3H, H)
                flops += 2 * steps * weight.shape[0] * weight.shape[1]
    flops += 2 * steps * model.decoder.ctc_lo.weight.shape[0] * model.decoder.ctc_lo.weight.shape[1]
    return 3 * flops * BATCH


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="timed steps (after warm-up)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after the first one")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="OMP_NUM_THREADS and MKL threads (default: every core; Paddle's own default is 1)")
    args = parser.parse_args()

    import numpy as np

    paddle = _import_paddle(args.threads)
    paddle.seed(0)
    model = build(paddle)
    model.train()
    grad_clip = paddle.nn.ClipGradByGlobalNorm(3.0)
    lr = paddle.optimizer.lr.ExponentialDecay(learning_rate=5e-4, gamma=0.93)
    optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters(),
                                      weight_decay=paddle.regularizer.L2Decay(1e-6), grad_clip=grad_clip)

    rng = np.random.default_rng(0)  # the same draws as bench/train.py's
    audio = paddle.to_tensor(rng.standard_normal((BATCH, FRAMES, FEATURE_DIM), np.float32))
    audio_len = paddle.full([BATCH], FRAMES, dtype="int64")
    text = paddle.to_tensor(rng.integers(1, VOCAB_SIZE, (BATCH, LABEL_LENGTH)).astype(np.int64))
    text_len = paddle.full([BATCH], LABEL_LENGTH, dtype="int64")

    def train_step() -> float:
        loss = model(audio, audio_len, text, text_len)
        value = float(loss)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        return value

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    first_s = timed(train_step)
    # After a step, which parameters got gradients (the unused `out` Linear gets none).
    loss = model(audio, audio_len, text, text_len)
    loss.backward()
    params = sum(int(np.prod(p.shape)) for p in model.parameters())
    trained = sum(int(np.prod(p.shape)) for p in model.parameters() if p.grad is not None)
    optimizer.clear_grad()
    for _ in range(args.warmup):
        train_step()
    cpu_start = time.process_time()
    times = [timed(train_step) for _ in range(args.steps)]
    cpu_s = (time.process_time() - cpu_start) / args.steps
    step_s = statistics.median(times)
    steps = (((FRAMES - 3) // 2 + 1) - 3) // 2 + 1
    flops = step_flops(model, steps)
    result = {
        "sent_per_s": BATCH / step_s,
        "step_ms": 1000 * step_s,
        "best_step_ms": 1000 * min(times),
        "cpu_ms": 1000 * cpu_s,
        "steps": args.steps,
        "audio_s_per_s": BATCH * SECONDS / step_s,
        "step_gflop": flops / 1e9,
        "gflop_per_s": flops / step_s / 1e9,
        "params": params,
        "trained_params": trained,
        "first_step_s": first_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_loss": train_step(),
        "paddle_version": paddle.__version__,
        "threads": args.threads,
    }
    print(f"PaddleSpeech DS2 (paddle {result['paddle_version']}, fp32, {args.threads} threads): "
          f"{result['sent_per_s']:.1f} sent/s  {result['audio_s_per_s']:.1f} audio-s/s  "
          f"step {result['step_ms']:.0f} ms (best {result['best_step_ms']:.0f}, CPU {result['cpu_ms']:.0f})  "
          f"{result['gflop_per_s']:.0f} GFLOP/s of {result['step_gflop']:.0f} GFLOP/step  "
          f"{params / 1e6:.2f} M params ({trained / 1e6:.2f} M trained)  "
          f"peak RSS {result['peak_rss_mb']:.0f} MB  first step {first_s:.1f} s  loss {result['final_loss']:.1f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
