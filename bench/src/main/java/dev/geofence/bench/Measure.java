package dev.geofence.bench;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.function.LongSupplier;

/**
 * How every figure of the benchmarks is taken, the same way for this project's code and for the
 * baseline: a timed run is split into equal windows, each window repeats a step (which returns how
 * many checks it did) until its time is up, and the figure is the median rate of the windows, with
 * the slowest and fastest beside it and the garbage-collection time spent during the windows. A
 * full collection runs before the first window, so neither side pays for the other's garbage.
 *
 * <p>Each window is also timed in CPU time of the whole process (every thread, the collector's
 * included), which a busy shared host disturbs much less than the clock: when other processes take
 * the cores, the clock runs on while this process waits, its CPU time does not.
 */
final class Measure {

  /**
   * The rates of the windows of one timed run: by the clock (median, slowest, fastest) and per
   * CPU-second of the process (median).
   */
  record Rate(double median, double min, double max, double perCpuSecond, long gcMillis) {
    /** Spread of the windows around the median, in percent. */
    double spreadPercent() {
      return 100 * (max - min) / median;
    }
  }

  private Measure() {}

  static Rate rate(LongSupplier step, double seconds, int windows) {
    usedHeap();
    long gcBefore = gcMillis();
    double[] rates = new double[windows];
    double[] cpuRates = new double[windows];
    long windowNanos = (long) (seconds * 1e9 / windows);
    for (int w = 0; w < windows; w++) {
      long checks = 0;
      long cpuStart = processCpuNanos();
      long start = System.nanoTime();
      long elapsed;
      do {
        checks += step.getAsLong();
        elapsed = System.nanoTime() - start;
      } while (elapsed < windowNanos);
      rates[w] = checks / (elapsed / 1e9);
      cpuRates[w] = checks / ((processCpuNanos() - cpuStart) / 1e9);
    }
    long gc = gcMillis() - gcBefore;
    Arrays.sort(rates);
    return new Rate(median(rates), rates[0], rates[windows - 1], median(cpuRates), gc);
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int n = sorted.length;
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }

  /** CPU time of the calling thread. */
  static long threadCpuNanos() {
    return ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
  }

  static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
  }

  /** One timed pass of a step, in checks per second (the first pass, which builds lazily). */
  static double once(LongSupplier step) {
    long start = System.nanoTime();
    long checks = step.getAsLong();
    return checks / ((System.nanoTime() - start) / 1e9);
  }

  static long gcMillis() {
    long total = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      total += Math.max(0, gc.getCollectionTime());
    }
    return total;
  }

  /**
   * A sum over the stop-the-world collectors only (their time or their count): G1's concurrent
   * cycle, which {@link #gcMillis} counts too, runs beside the application.
   */
  static long pauses(java.util.function.ToLongFunction<GarbageCollectorMXBean> what) {
    long total = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      if (!gc.getName().contains("Concurrent")) {
        total += Math.max(0, what.applyAsLong(gc));
      }
    }
    return total;
  }

  /** Heap in use after full collections have settled, so garbage is not counted as retained. */
  static long usedHeap() {
    Runtime runtime = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      System.gc();
      long now = runtime.totalMemory() - runtime.freeMemory();
      if (Math.abs(used - now) < (1 << 20)) {
        return now;
      }
      used = now;
    }
    return used;
  }

  /** The machine's load average, printed with every run: the figures mean little on a busy host. */
  static String load() {
    double load = ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    return String.format(java.util.Locale.ROOT, "%.2f", load);
  }
}
