package dev.geofence.job.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.testing.Waiting;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.TimeUtils;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code ready} against a real MiniCluster and its REST API: a stand-in "Fence index" operator
 * exports the fence index's gauges with values the test sets, and the probe reads them as it would
 * the job's.
 */
class ReadinessProbeTest {

  @RegisterExtension
  static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
      .setConfiguration(fetchMetricsOften()).setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4).build());

  /** What the stand-in operator's gauges say; the operator's subtasks read it on every fetch. */
  enum IndexState { LOADING, REREADING, GAP, READY }

  static volatile IndexState state = IndexState.LOADING;

  private static Configuration fetchMetricsOften() {
    Configuration config = new Configuration();
    config.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(500));
    return config;
  }

  @Test
  void namesEachSubtaskThatIsNotReadyWithItsPhaseUntilAllAre() throws Exception {
    state = IndexState.LOADING;
    JobClient job = start("geofence-probe-test", true);
    try {
      Result r = probeUntil(out -> out.contains("catching-up"), "--job", "geofence-probe-test");
      assertThat(r.status).as(r.out).isEqualTo(1);
      assertThat(r.out.strip()).isEqualTo("not ready: subtask 0 indexing for 12.0 s (completeness 0.50, 20 buckets unmatched);"
          + " subtask 1 catching-up for 12.0 s (completeness 0.42, 10 buckets unmatched, 3.0 s behind)");

      state = IndexState.REREADING;
      // Both subtasks' gauges move on their own fetches: until subtask 0's has, it still says indexing.
      r = probeUntil(out -> out.contains("re-reading") && !out.contains("subtask 0"));
      assertThat(r.status).as(r.out).isEqualTo(1);
      assertThat(r.out.strip()).isEqualTo("not ready: subtask 1 re-reading for 1 min 35 s (completeness 0.99, 2 buckets unmatched:"
          + " 17, 203, 5 bucket re-reads, 3 of them not matching (retried with backoff))");

      state = IndexState.GAP;
      r = probeUntil(out -> out.contains("gap detected") && !out.contains("subtask 0"));
      assertThat(r.status).as(r.out).isEqualTo(1);
      assertThat(r.out.strip()).isEqualTo("not ready: subtask 1 gap detected, rebuilding for 800 ms");

      state = IndexState.READY;
      r = probeUntil(out -> out.startsWith("ready"), "--job", job.getJobID().toString());
      assertThat(r.status).as(r.out).isZero();
      assertThat(r.out.strip()).isEqualTo("ready: 2 of 2 subtasks, 300 fences");
    } finally {
      job.cancel().get();
    }
    Result r = probeUntil(out -> out.contains("CANCELED"), "--job", job.getJobID().toString());
    assertThat(r.status).isEqualTo(1);
    assertThat(r.out.strip()).isEqualTo("not ready: job '" + job.getJobID() + "' is not running (CANCELED)");
  }

  @Test
  void aFenceIndexWithoutTheMetricIsNotReadyAndSaysWhy() throws Exception {
    JobClient job = start("geofence-probe-no-gauges", false);
    try {
      Result r = probeUntil(out -> out.contains("metric"));
      assertThat(r.status).isEqualTo(1);
      assertThat(r.out.strip()).isEqualTo("not ready: the fence index has no index_ready metric yet"
          + " (Flink fetches metrics every metrics.fetcher.update-interval; ask again)");

      r = probe("--job", "some-other-job");
      assertThat(r.status).isEqualTo(1);
      assertThat(r.out.strip()).isEqualTo("not ready: no job named or with id 'some-other-job' at " + restUrl());
    } finally {
      job.cancel().get();
    }
  }

  @Test
  void noRunningJobIsNotReady() throws Exception {
    Result r = probeUntil(out -> out.contains("no job is running"));
    assertThat(r.status).isEqualTo(1);
    assertThat(r.out.strip()).isEqualTo("not ready: no job is running at " + restUrl());
  }

  @Test
  void anUnreachableRestApiIsNotReadyAtOnce() throws Exception {
    int closedPort;
    try (ServerSocket socket = new ServerSocket(0)) {
      closedPort = socket.getLocalPort();
    }
    long start = System.nanoTime();
    Result r = run("ready", "--rest-url", "http://localhost:" + closedPort);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(3));
    assertThat(r.status).isEqualTo(1);
    assertThat(r.out).startsWith("not ready: cannot reach Flink's REST API at http://localhost:" + closedPort + " (");
  }

  @Test
  void aRestApiThatDoesNotAnswerIsNotReadyAfterTheTimeout() throws Exception {
    // The kernel accepts the connection into the backlog; nothing ever reads the request.
    try (ServerSocket silent = new ServerSocket(0)) {
      long start = System.nanoTime();
      Result r = run("ready", "--rest-url", "http://localhost:" + silent.getLocalPort(), "--timeout", "500ms");
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(3));
      assertThat(r.status).isEqualTo(1);
      assertThat(r.out.strip()).isEqualTo("not ready: Flink's REST API at http://localhost:" + silent.getLocalPort()
          + " did not answer within 500 ms");
    }
  }

  // ---- the stand-in job -------------------------------------------------------------------------

  private static JobClient start(String name, boolean gauges) throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(2);
    env.fromSequence(0, Long.MAX_VALUE)
        .map(new FenceIndexStandIn(gauges)).name("Fence index")
        .sinkTo(new DiscardingSink<>());
    return env.executeAsync(name);
  }

  /** Slow (it only has to run) and, if asked to, exports the fence index's gauges. */
  private static final class FenceIndexStandIn extends RichMapFunction<Long, Long> {
    private static final long serialVersionUID = 1L;
    private final boolean gauges;

    FenceIndexStandIn(boolean gauges) {
      this.gauges = gauges;
    }

    @Override
    public void open(OpenContext context) {
      if (!gauges) {
        return;
      }
      int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
      MetricGroup metrics = getRuntimeContext().getMetricGroup();
      for (String gauge : new String[] {"index_ready", "index_load_phase", "index_phase_ms", "index_completeness", "fences_loaded",
          "fences_expected", "gap_detected", "buckets_unmatched", "buckets_reread", "buckets_reread_unmatched", "catchup_lag_ms"}) {
        metrics.gauge(gauge, (Gauge<Double>) () -> value(gauge, subtask));
      }
      metrics.gauge("buckets_unmatched_list", (Gauge<String>) () -> state == IndexState.REREADING && subtask == 1 ? "17, 203" : "");
    }

    private static double value(String gauge, int subtask) {
      IndexState s = state;
      boolean ready = s == IndexState.READY || (subtask == 0 && (s == IndexState.GAP || s == IndexState.REREADING));
      boolean rereading = s == IndexState.REREADING && !ready;
      switch (gauge) {
        case "index_ready":
          return ready ? 1 : 0;
        case "index_load_phase":
          return ready ? 6 : s == IndexState.GAP ? 7 : rereading ? 9 : subtask == 0 ? 2 : 4;
        case "index_phase_ms":
          return s == IndexState.GAP ? 800 : rereading ? 95_000 : 12_000;
        case "index_completeness":
          return ready || s == IndexState.GAP ? 1 : rereading ? 0.99 : subtask == 0 ? 0.5 : 0.42;
        case "fences_loaded":
        case "fences_expected":
          return 100 + 100 * subtask;
        case "gap_detected":
          return ready || s != IndexState.GAP ? 0 : 1;
        case "buckets_unmatched":
          return ready || s == IndexState.GAP ? 0 : rereading ? 2 : subtask == 0 ? 20 : 10;
        case "buckets_reread":
          return rereading ? 5 : 0;
        case "buckets_reread_unmatched":
          return rereading ? 3 : 0;
        case "catchup_lag_ms":
          return 3000;
        default:
          throw new IllegalArgumentException(gauge);
      }
    }

    @Override
    public Long map(Long value) throws Exception {
      // Throttles the endless sequence to ten records a second: the stand-in only has to run.
      Thread.sleep(100);
      return value;
    }
  }

  /**
   * {@code ready} runs without Flink, so it parses its {@code --timeout} itself: as Flink's {@code
   * TimeUtils} does, for every unit name Flink knows, with and without a blank, in any case, and
   * refusing what Flink refuses.
   */
  @Test
  void timeoutsParseAsFlinkParsesDurations() {
    List<String> texts = new ArrayList<>(List.of("0", "1500", " 7 ", "1.5s", "-5s", "s", "", "5 sekunden", "10 S", "3 Min",
        "99999999999999999999 d", "9223372036854775807 ns", "106751991167301 d"));
    for (String unit : List.of("d", "day", "days", "h", "hour", "hours", "min", "m", "minute", "minutes", "s", "sec", "secs",
        "second", "seconds", "ms", "milli", "millis", "millisecond", "milliseconds", "µs", "micro", "micros", "microsecond",
        "microseconds", "ns", "nano", "nanos", "nanosecond", "nanoseconds")) {
      texts.add("42" + unit);
      texts.add("3 " + unit);
    }
    for (String text : texts) {
      Duration flink;
      try {
        flink = TimeUtils.parseDuration(text);
      } catch (RuntimeException e) {
        flink = null;
      }
      Duration probe;
      try {
        probe = ReadinessProbe.duration("timeout", text);
      } catch (IllegalArgumentException e) {
        probe = null;
      }
      assertThat(probe).as("'%s'", text).isEqualTo(flink);
    }
  }

  // ---- running the probe ------------------------------------------------------------------------

  private static String restUrl() {
    Configuration client = FLINK.getClientConfiguration();
    return "http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT);
  }

  private static Result probe(String... options) throws Exception {
    String[] args = new String[options.length + 3];
    args[0] = "ready";
    args[1] = "--rest-url";
    args[2] = restUrl();
    System.arraycopy(options, 0, args, 3, options.length);
    return run(args);
  }

  /** Flink fetches metrics periodically and starts jobs asynchronously: asks until the answer fits. */
  private static Result probeUntil(Predicate<String> answer, String... options) throws Exception {
    return Waiting.until("ready " + String.join(" ", options) + " to answer as expected", Duration.ofSeconds(60),
        () -> probe(options), r -> answer.test(r.out));
  }

  private record Result(int status, String out, String err) {}

  private static Result run(String... args) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = GeofenceCommand.run(args, new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }
}
