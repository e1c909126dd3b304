package dev.geofence.savepoints;

import java.io.PrintStream;
import java.util.Locale;

/**
 * Progress of a long run, on the error stream so that a command's output stays clean: what was
 * processed, the rate, and the time left when the total is known; a line every few seconds and a
 * last one when done.
 */
final class Progress {

  private static final long EVERY_NANOS = 5_000_000_000L;

  private final PrintStream out;
  private final String what;
  private final long total;
  private final long started = System.nanoTime();
  private long last = started;
  private long done;

  /** @param total how many there are, or -1 when that is not known in advance */
  Progress(PrintStream out, String what, long total) {
    this.out = out;
    this.what = what;
    this.total = total;
  }

  void tick() {
    done++;
    long now = System.nanoTime();
    if (now - last >= EVERY_NANOS) {
      last = now;
      out.println(line(now));
    }
  }

  void finish() {
    out.println(line(System.nanoTime()) + ", done");
  }

  private String line(long now) {
    double seconds = Math.max(1e-9, (now - started) / 1e9);
    double rate = done / seconds;
    String eta = total > done && rate > 0 ? String.format(Locale.ROOT, ", about %.0f s left", (total - done) / rate) : "";
    String of = total >= 0 ? String.format(Locale.ROOT, " of %,d", total) : "";
    return String.format(Locale.ROOT, "%s: %,d%s in %.1f s (%,.0f/s)%s", what, done, of, seconds, rate, eta);
  }
}
