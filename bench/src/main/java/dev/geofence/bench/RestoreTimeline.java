package dev.geofence.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.AxisLocation;
import org.jfree.chart.axis.CategoryAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.CategoryPlot;
import org.jfree.chart.plot.PlotOrientation;
import org.jfree.chart.plot.ValueMarker;
import org.jfree.chart.renderer.category.StackedBarRenderer;
import org.jfree.chart.renderer.category.StandardBarPainter;
import org.jfree.chart.title.LegendTitle;
import org.jfree.chart.title.TextTitle;
import org.jfree.chart.ui.HorizontalAlignment;
import org.jfree.chart.ui.RectangleAnchor;
import org.jfree.chart.ui.RectangleEdge;
import org.jfree.chart.ui.TextAnchor;
import org.jfree.data.category.DefaultCategoryDataset;

/**
 * Draws a restore's timeline from its {@code hydration_history} rows: one horizontal bar per
 * subtask, from the moment the first subtask began to initialize, split into the phases the rows
 * time: the state backend's start and the read of keyed state ({@code installed_at} to {@code
 * restored_at}), indexing ({@code restored_at} to {@code indexed_at}), and the gap check,
 * catching up and verifying ({@code indexed_at} to {@code hydrated_at}, when the subtask is
 * ready). A vertical line marks the first trigger the job emitted, if given. Written as a PNG with
 * JFreeChart, headless.
 *
 * <p>Usage: {@code RestoreTimeline EPISODES.tsv OUT.png TITLE CAPTION [FIRST_TRIGGER_MS]}, where
 * each line of the file is {@code subtask, installed_at, restored_at, indexed_at, hydrated_at} in
 * epoch milliseconds, tab-separated (as {@code bench/restores} writes it with psql).
 */
public final class RestoreTimeline {

  /** The phases a row times, in order; what hydration_history cannot tell apart shares a bar. */
  private static final String[] PHASES = {
    "starting and restoring (installed_at -> restored_at)",
    "indexing (restored_at -> indexed_at)",
    "gap-check, catching-up, verifying (indexed_at -> hydrated_at)",
  };
  private static final Color[] COLORS = {new Color(0x4E79A7), new Color(0xF28E2B), new Color(0x59A14F)};
  private static final String OFFSET = "not yet initializing";

  /** One subtask's episode, epoch milliseconds. */
  record Episode(int subtask, long installed, long restored, long indexed, long hydrated) {

    Episode {
      if (!(installed <= restored && restored <= indexed && indexed <= hydrated)) {
        throw new IllegalArgumentException("subtask " + subtask + ": its times are not in order: " + installed + ", " + restored
            + ", " + indexed + ", " + hydrated);
      }
    }
  }

  private RestoreTimeline() {}

  public static void main(String[] args) throws IOException {
    if (args.length < 4 || args.length > 5) {
      System.err.println("usage: RestoreTimeline EPISODES.tsv OUT.png TITLE CAPTION [FIRST_TRIGGER_MS]");
      System.exit(2);
    }
    List<Episode> episodes = read(Path.of(args[0]));
    Long firstTrigger = args.length == 5 && !args[4].isBlank() && !args[4].equals("-") ? Long.valueOf(args[4]) : null;
    JFreeChart chart = chart(episodes, args[2], args[3], firstTrigger);
    ChartUtils.saveChartAsPNG(Path.of(args[1]).toFile(), chart, 1000, 160 + 42 * episodes.size());
    System.out.println(args[1]);
  }

  static List<Episode> read(Path file) throws IOException {
    List<Episode> episodes = new ArrayList<>();
    for (String line : Files.readAllLines(file)) {
      if (line.isBlank()) {
        continue;
      }
      String[] f = line.strip().split("\t");
      if (f.length != 5) {
        throw new IllegalArgumentException("expected subtask, installed, restored, indexed, hydrated; got '" + line + "'");
      }
      episodes.add(new Episode(Integer.parseInt(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]),
          Long.parseLong(f[4])));
    }
    if (episodes.isEmpty()) {
      throw new IllegalArgumentException(file + " holds no episode");
    }
    return episodes;
  }

  static JFreeChart chart(List<Episode> episodes, String title, String caption, Long firstTrigger) {
    long start = episodes.stream().mapToLong(Episode::installed).min().orElseThrow();
    DefaultCategoryDataset data = new DefaultCategoryDataset();
    for (Episode e : episodes) {
      String subtask = "subtask " + e.subtask();
      data.addValue(seconds(e.installed() - start), OFFSET, subtask);
      data.addValue(seconds(e.restored() - e.installed()), PHASES[0], subtask);
      data.addValue(seconds(e.indexed() - e.restored()), PHASES[1], subtask);
      data.addValue(seconds(e.hydrated() - e.indexed()), PHASES[2], subtask);
    }
    StackedBarRenderer renderer = new StackedBarRenderer();
    renderer.setBarPainter(new StandardBarPainter());
    renderer.setShadowVisible(false);
    renderer.setMaximumBarWidth(0.5);
    renderer.setSeriesPaint(0, new Color(0, 0, 0, 0));
    renderer.setSeriesVisibleInLegend(0, false);
    for (int i = 0; i < PHASES.length; i++) {
      renderer.setSeriesPaint(i + 1, COLORS[i]);
    }
    NumberAxis time = new NumberAxis("seconds since the first subtask began to initialize");
    time.setUpperMargin(0.02);
    CategoryPlot plot = new CategoryPlot(data, new CategoryAxis(null), time, renderer);
    plot.setOrientation(PlotOrientation.HORIZONTAL);
    plot.setRangeAxisLocation(AxisLocation.BOTTOM_OR_LEFT);
    plot.setBackgroundPaint(Color.WHITE);
    plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
    long ready = episodes.stream().mapToLong(Episode::hydrated).max().orElseThrow();
    // Both labels left of their lines, one at the top and one at the bottom, so that a first
    // trigger at the moment of readiness does not hide it.
    plot.addRangeMarker(marker(seconds(ready - start), String.format(Locale.ROOT, "ready %.1f s", seconds(ready - start)),
        Color.BLACK, RectangleAnchor.TOP_LEFT, TextAnchor.TOP_RIGHT));
    if (firstTrigger != null) {
      plot.addRangeMarker(marker(seconds(firstTrigger - start),
          String.format(Locale.ROOT, "first trigger %.1f s", seconds(firstTrigger - start)), Color.RED,
          RectangleAnchor.BOTTOM_LEFT, TextAnchor.BOTTOM_RIGHT));
    }
    JFreeChart chart = new JFreeChart(title, new Font(Font.SANS_SERIF, Font.BOLD, 15), plot, false);
    chart.setBackgroundPaint(Color.WHITE);
    // The caption (date and command) outermost, the legend between it and the plot.
    TextTitle subtitle = new TextTitle(caption, new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    subtitle.setPosition(RectangleEdge.BOTTOM);
    subtitle.setHorizontalAlignment(HorizontalAlignment.LEFT);
    chart.addSubtitle(subtitle);
    LegendTitle legend = new LegendTitle(plot);
    legend.setPosition(RectangleEdge.BOTTOM);
    chart.addSubtitle(legend);
    return chart;
  }

  private static ValueMarker marker(double at, String label, Color color, RectangleAnchor where, TextAnchor text) {
    ValueMarker marker = new ValueMarker(at, color, new BasicStroke(1.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f,
        new float[] {4f, 3f}, 0f));
    marker.setLabel(label + " ");
    marker.setLabelFont(new Font(Font.SANS_SERIF, Font.BOLD, 11));
    marker.setLabelPaint(color);
    marker.setLabelBackgroundColor(new Color(255, 255, 255, 210));
    marker.setLabelAnchor(where);
    marker.setLabelTextAnchor(text);
    return marker;
  }

  private static double seconds(long millis) {
    return millis / 1000.0;
  }
}
