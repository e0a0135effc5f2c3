"""What the benchmarks' plots share (the scripts run from this folder, so it is importable)."""


def plain_log_axis(axis, subs=(1.0, 2.0, 5.0)) -> None:
    """Label a log-scale axis with plain numbers at each decade times `subs` (0.5, 1, 2,
    5, 10, ...), instead of matplotlib's 5 x 10^-1; subs=(1.0,) labels only the decades."""
    import matplotlib.ticker as ticker

    axis.set_major_locator(ticker.LogLocator(subs=subs))
    axis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axis.set_minor_formatter(ticker.NullFormatter())
