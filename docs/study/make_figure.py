#!/usr/bin/python3
"""Draws docs/study/equal_resources.png from a finished sweep on a running scheduler.

The equal-resource figure of the CPU study: final validation BPC against the activation rate r_a
per compute budget, the mean over seeds with the seed-to-seed range as error bars, and the dense
baselines at 1C and 2C of each budget as horizontal lines (mean over seeds, range shaded).

    PYTHONPATH=build/clients/python docs/study/make_figure.py SWEEP_ID [OUT.png]

Uses parity_client (clients/python), pandas and matplotlib (python3-pandas, python3-matplotlib).
"""
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import parity_client  # noqa: E402


def main(sweep_id: str, out: str) -> None:
    with parity_client.connect() as client:
        df = client.results_frame(sweep_id)
    df = df[df.state == "succeeded"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for budget, group in df.groupby("compute_budget"):
        moe = group[group.role == "moe"].groupby("activation_rate").final_val_bpc
        mean, low, high = moe.mean(), moe.min(), moe.max()
        bars = ax.errorbar(mean.index, mean.values, yerr=[mean - low, high - mean], fmt="o-",
                           capsize=3, label=f"MoE, {budget} (mean of {moe.size().max()} seeds)")
        color = bars.lines[0].get_color()
        dense = group[group.role == "dense_baseline"].groupby("compute_multiple").final_val_bpc
        for multiple, bpc in dense:
            style = "--" if multiple == 1 else ":"
            # dense 2C of C1 is dense 1C of C2 (the same runs when C2 = 2·C1): drawn twice.
            ax.axhline(bpc.mean(), color=color, linestyle=style,
                       label=f"dense {multiple:g}C of {budget} ({bpc.mean():.3f})")
            ax.axhspan(bpc.min(), bpc.max(), color=color, alpha=0.08)
    ax.set_xscale("log")
    ax.set_xticks([0.15, 0.2, 0.3, 0.45, 0.6])
    ax.set_xticklabels(["15%", "20%", "30%", "45%", "60%"])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("activation rate r_a = N_a / N  (N ≈ 1.6M for every model)")
    ax.set_ylabel("final validation BPC")
    ax.set_title("Equal N, equal C, unique data: MoE against dense on the CPU engine")
    ax.legend(fontsize="small", ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=150)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "docs/study/equal_resources.png")
