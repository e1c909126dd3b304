"""The trend of each of bench/soak's series, and whether it grows.

Usage: python3 bench/soak-verdict.py SAMPLES [WARM_UP]
SAMPLES is bench/soak's tab-separated file: a header, then a row per minute (restarted = 1 on the
first row after a start or a savepoint round trip). The trends are fitted over the minutes after
WARM_UP (default 0), while the job's state fills to its steady size.

Each series is fitted by least squares, y = a + b * hours. It "grows" when all three hold:
  - b > 0 and b is 3 standard errors or more from 0 (a trend, not the minute-to-minute noise),
  - b times the run's span is 5 % of the series' median or more (a trend that matters: a job
    that runs for months cannot afford a few percent more per hour; less is within what the
    minute-to-minute noise of one hour can hide, so a longer run is what resolves it), and
  - b times the span exceeds the series' resolution (0.1 MB, 0.01 s), so a flat series printed
    to one decimal is not a trend.
A savepoint round trip starts a new JVM, which resets what only one JVM holds (its heap's garbage
and caches); so the heap and the RSS outside the committed heap are also fitted within runs (one
intercept per run, one common slope), which is where a leak in one JVM shows. RSS itself is not:
a restored JVM commits its heap lazily, up to -Xmx, so its RSS climbs for minutes after a start
without a leak. The lags leave out the minutes after a start:
those carry the locations held while the job was down or warming up (the round trip's cost,
printed in its note), not the steady state.
"""
import csv
import math
import statistics
import sys

every = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
warm_up = int(sys.argv[2]) if len(sys.argv) > 2 else 0
run = 0
for row in every:
    run += int(row["restarted"])
    row["run"] = run
    row["hours"] = int(row["minute"]) / 60
rows = [r for r in every if int(r["minute"]) > warm_up]
if len(rows) < 3:
    sys.exit(f"bench/soak-verdict.py: fewer than 3 samples after the {warm_up} min warm-up, no trend to fit")


def fit(points):
    """(slope, standard error) of y on x over [(group, x, y)], one intercept per group."""
    groups = {}
    for g, x, y in points:
        groups.setdefault(g, []).append((x, y))
    dx, dy = [], []
    for members in groups.values():
        mx = sum(x for x, _ in members) / len(members)
        my = sum(y for _, y in members) / len(members)
        dx += [x - mx for x, _ in members]
        dy += [y - my for _, y in members]
    sxx = sum(v * v for v in dx)
    dof = len(points) - len(groups) - 1
    if sxx == 0 or dof < 1:
        return None
    b = sum(u * v for u, v in zip(dx, dy)) / sxx
    residual = sum((v - b * u) ** 2 for u, v in zip(dx, dy))
    return b, math.sqrt(residual / dof / sxx)


def spark(values):
    bars = "▁▂▃▄▅▆▇█"
    low, high = min(values), max(values)
    return "".join(bars[0 if high == low else round((v - low) / (high - low) * 7)] for v in values)


SERIES = [  # column, label, unit, resolution, steady minutes only, within runs
    ("heap_mb", "heap after full GC", "MB", 0.1, False, False),
    ("heap_mb", "heap after full GC, within runs", "MB", 0.1, False, True),
    ("rss_mb", "RSS of the job's JVM", "MB", 0.1, False, False),
    ("off_heap_mb", "RSS outside the committed heap", "MB", 0.1, False, False),
    ("off_heap_mb", "RSS outside the committed heap, within runs", "MB", 0.1, False, True),
    ("checkpoint_mb", "last checkpoint, uploaded", "MB", 0.1, False, False),
    ("state_mb", "last checkpoint, full state", "MB", 0.1, False, False),
    ("cp_dir_mb", "checkpoint directory", "MB", 0.1, False, False),
    ("history", "fence versions kept for late locations", "", 1, False, False),
    ("lag_p50_s", "trigger lag p50 (emitted - event time)", "s", 0.01, True, False),
    ("lag_p99_s", "trigger lag p99", "s", 0.01, True, False),
    ("fresh_s", "freshness (now - newest trigger)", "s", 0.01, True, False),
]
span = rows[-1]["hours"] - rows[0]["hours"]
print(f"\n{len(rows)} samples over {span * 60:.0f} minutes after a {warm_up} min warm-up, {rows[-1]['run']} runs"
      f" of the job\n")
print("| series | median | slope per hour | standard error | over the run | verdict | per minute |")
print("|---|---:|---:|---:|---:|---|---|")
grows = []
for column, label, unit, resolution, steady, within in SERIES:
    points = [(r["run"] if within else 0, r["hours"], float(r[column])) for r in rows
              if not (steady and r["restarted"] == "1") and float(r[column]) >= 0]
    values = [y for _, _, y in points]
    result = fit(points) if len(points) >= 3 else None
    if result is None:
        print(f"| {label} | | | | | too few samples | |")
        continue
    b, se = result
    median = statistics.median(values)
    rise = b * span
    if b > 0 and b >= 3 * se and rise >= 0.05 * abs(median) and rise > resolution:
        verdict = "**grows**"
        grows.append(label)
    elif b < 0 and -b >= 3 * se and -rise >= 0.05 * abs(median) and -rise > resolution:
        verdict = "falls"
    else:
        verdict = "flat"
    share = f" ({rise / median:+.0%})" if median else ""
    digits = max(0, -math.floor(math.log10(resolution)))
    unit = " " + unit if unit else ""
    print(f"| {label} | {median:,.{digits}f}{unit} | {b:+,.{digits}f} | {se:,.{digits}f} | {rise:+,.{digits}f}{unit}{share}"
          f" | {verdict} | {spark(values)} |")
notes = [f"  minute {r['minute']}: {r['note']}" for r in every if r["note"]]
print("\nstarts and round trips (each on the first sample of the run it started):")
print("\n".join(notes))
# cp_failed counts since its run's start: a run's last row holds the run's count.
last = {r["run"]: r for r in every}
print(f"checkpoints: {sum(int(r['cp_ok']) for r in last.values())} completed, "
      f"{sum(int(r['cp_failed']) for r in last.values())} failed (up to each run's last sample)")
print("\nverdict: " + ("GROWS: " + ", ".join(grows) if grows else "nothing grows"))
