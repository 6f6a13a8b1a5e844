"""The learning curve: the records of epochs.json drawn as learning_curve.png, redrawn at every epoch's end."""

from __future__ import annotations

import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def read_epochs(workdir: Path) -> list[dict]:
    """The epoch records of workdir/epochs.json ([] without one, or when it is not valid JSON: a new one starts)."""
    path = workdir / "epochs.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    except json.JSONDecodeError:
        logger.warning("%s is not valid JSON; starting a new one", path)
        return []


def plot_learning_curve(epochs: list[dict], png: str | Path) -> None:
    """Train loss and dev WER/CER per epoch, as a PNG (written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from deepspeech2.fileio import atomic_path

    x = [e["epoch"] for e in epochs]
    fig, ax = plt.subplots(figsize=(7, 5), dpi=100)
    curve = [point for e in epochs for point in e.get("loss_curve") or ()]  # x in epochs done
    if curve:  # within each epoch, so that a run of few long epochs still shows how it learned
        ax.plot([c[0] for c in curve], [c[1] for c in curve], "-", color="tab:blue", alpha=0.35, lw=1,
                label="train loss (CTC, blocks of steps)")
    ax.plot(x, [e["train_loss"] for e in epochs], "o-", color="tab:blue", label="train loss (CTC, epoch mean)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("train loss", color="tab:blue")
    ax.set_xticks(([0] if curve else []) + x)
    means = [e["train_loss"] for e in epochs if e["train_loss"] is not None]
    if curve and means:  # the first blocks' loss (an untrained model) would flatten the rest
        ax.set_ylim(0, 1.5 * max(means))
    handles = ax.get_legend_handles_labels()
    if any(e["dev_wer"] is not None for e in epochs):
        err = ax.twinx()
        ema = any("dev_wer_trained" in e for e in epochs)  # ema_decay: dev_wer is the moving average's
        suffix = ", weights' moving average" if ema else ""
        percent = lambda key: [100 * e[key] if e.get(key) is not None else None for e in epochs]  # noqa: E731
        for key, color, marker in (("wer", "tab:red", "s"), ("cer", "tab:orange", "^")):
            err.plot(x, percent(f"dev_{key}"), f"{marker}-", color=color,
                     label=f"dev {key.upper()} (greedy{suffix})")
            if ema:
                err.plot(x, percent(f"dev_{key}_trained"), f"{marker}--", color=color, alpha=0.6, mfc="none",
                         label=f"dev {key.upper()} (greedy, weights as trained)")
        err.set_ylabel("dev error rate (%)")
        err.set_ylim(0, max(100, *(100 * e["dev_wer"] for e in epochs if e["dev_wer"] is not None)))
        h2 = err.get_legend_handles_labels()
        handles = (handles[0] + h2[0], handles[1] + h2[1])
    # Below the axes: inside, it hid the dev curves wherever they ran high (a hard dev set, an early epoch).
    ax.legend(*handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8)
    ax.set_title("learning curve")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
