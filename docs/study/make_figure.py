#!/usr/bin/python3
"""Draws docs/study/equal_resources.png from a finished sweep on a running scheduler.

The equal-resource figure of the CPU study, from the scheduler's analysis (client.analyze): final
validation BPC against the activation rate r_a per compute budget (mean over seeds, ± one seed
standard deviation), the region of r_a not distinguishable from the best grid point shaded, and
every dense baseline of the budget (1C, 2C on unique data) as a horizontal line. Groups come from
the analysis, so a run planned once for two groups (dense 2C of C1 = dense 1C of C2) is drawn in
both.

    PYTHONPATH=build/clients/python docs/study/make_figure.py SWEEP_ID [OUT.png]

Uses parity_client (clients/python) and matplotlib (python3-matplotlib).
"""
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import parity_client  # noqa: E402


def main(sweep_id: str, out: str) -> None:
    with parity_client.connect() as client:
        analysis = client.analyze(sweep_id)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    rates = set()
    for optimum in analysis.optima:
        grid = sorted(optimum.grid, key=lambda p: p.activation_rate)
        x = [p.activation_rate for p in grid]
        rates.update(x)
        bars = ax.errorbar(x, [p.bpc_mean for p in grid], yerr=[p.bpc_spread for p in grid],
                           fmt="o-", capsize=3,
                           label=f"MoE, {optimum.compute_budget} ({max(p.seeds for p in grid)} seeds)")
        color = bars.lines[0].get_color()
        if optimum.region_low is not None:
            ax.axvspan(optimum.region_low * 0.97, optimum.region_high * 1.03, color=color,
                       alpha=0.08)
        dense = [g for g in analysis.grid_points
                 if g.role == "dense_baseline" and g.group.split("/")[0] == optimum.compute_budget
                 and g.data_variant == optimum.data_variant]
        for g in sorted(dense, key=lambda g: g.compute_multiple):
            style = "--" if abs(g.compute_multiple - 1) < 1e-9 else ":"
            ax.axhline(g.bpc_mean, color=color, linestyle=style,
                       label=f"dense {g.compute_multiple:g}C of {g.compute_budget} "
                             f"({g.bpc_mean:.3f})")
    ax.set_xscale("log")
    ticks = sorted(rates)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{r:.0%}" for r in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("activation rate r_a = N_a / N  (top-K = 2; N ≈ 1.67M for every model)")
    ax.set_ylabel("final validation BPC")
    ax.set_title("Equal N, equal C, unique data: MoE against dense on the CPU engine\n"
                 "(shaded: r_a not distinguishable from the best point at 90%)", fontsize=10)
    ax.legend(fontsize="small", ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=150)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "docs/study/equal_resources.png")
