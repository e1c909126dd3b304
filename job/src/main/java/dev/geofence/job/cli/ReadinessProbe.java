package dev.geofence.job.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.config.CommandArguments;
import dev.geofence.job.GeofenceJob;
import dev.geofence.job.handover.HandoverMetrics;
import dev.geofence.job.index.FenceIndexMetrics;
import dev.geofence.state.readiness.LoadPhase;
import java.io.IOException;
import java.io.PrintStream;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.UnknownHostException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.channels.UnresolvedAddressException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * {@code ready}: whether the fence index of a running job is ready to evaluate locations, for
 * readiness probes. It only reads Flink's REST API (the job, its "Fence index" vertex and that
 * operator's gauges per subtask) and never changes the job.
 *
 * <p>Contract: prints one line and returns 0 with {@code ready: N of N subtasks, F fences} when
 * every subtask of the fence index reports {@code index_ready} = 1 (with a handover, followed by
 * what the instance writes: {@code ; writes the outputs}, {@code ; standby: ...}, ...). Otherwise returns 1 with
 * {@code not ready: ...}: each subtask that is not ready (numbered from 0, as in Flink's REST API)
 * with its load phase (if the operator exports {@code index_load_phase}) and what it waits for, or
 * one sentence saying why readiness cannot be told (REST API unreachable or slower than {@code
 * --timeout}, no such running job, a metric not fetched yet). All requests together take at most
 * {@code --timeout}. The answer is as fresh as Flink's {@code metrics.fetcher.update-interval}.
 * Bad options throw {@link IllegalArgumentException}.
 */
final class ReadinessProbe {

  /**
   * One of {@code ready}'s options. {@code ready} runs without Flink on its class path (the
   * launcher runs it in its own JVM: a probe runs every few seconds), so its options are not
   * Flink ConfigOptions: each is declared here once, and the help is generated from it.
   *
   * @param defaultValue as the option's value would be written, or null
   */
  private record Option(String name, String metavar, String defaultValue, String description) {}

  private static final Option REST_URL = new Option("rest-url", "URL", null, "Flink's REST API, e.g. http://localhost:8081 (required).");
  private static final Option JOB = new Option("job", "NAME_OR_ID", null, "The job to ask about (default: the only running job).");
  private static final Option TIMEOUT = new Option("timeout", "D", "5 s", "How long all requests together may take.");
  private static final List<Option> OPTIONS = List.of(REST_URL, JOB, TIMEOUT);

  static final String OPTIONS_HELP = "Options of ready (one line on stdout: ready: ... with exit 0, or not ready: REASON with exit 1):\n"
      + OPTIONS.stream()
          .flatMap(o -> CommandArguments.helpEntry("--" + o.name() + " " + o.metavar(), o.description(),
              o.defaultValue() == null ? null : "default " + o.defaultValue()).stream())
          .collect(Collectors.joining("\n"));

  private static final String VERTEX = GeofenceJob.FENCE_INDEX_NAME;
  private static final String[] GAUGES = {
    FenceIndexMetrics.INDEX_READY, FenceIndexMetrics.LOAD_PHASE, FenceIndexMetrics.PHASE_MS, FenceIndexMetrics.COMPLETENESS,
    FenceIndexMetrics.FENCES_LOADED, FenceIndexMetrics.GAP_DETECTED, FenceIndexMetrics.BUCKETS_UNMATCHED,
    FenceIndexMetrics.BUCKETS_UNMATCHED_LIST, FenceIndexMetrics.BUCKETS_REREAD, FenceIndexMetrics.BUCKETS_REREAD_UNMATCHED,
    FenceIndexMetrics.CATCHUP_LAG_MS};
  private static final String FETCHED = " (Flink fetches metrics every metrics.fetcher.update-interval; ask again)";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String restUrl;
  private final String job;
  private final Duration timeout;
  private final long deadline;
  private final HttpClient http;

  private ReadinessProbe(String restUrl, String job, Duration timeout) {
    this.restUrl = restUrl;
    this.job = job;
    this.timeout = timeout;
    this.deadline = System.nanoTime() + timeout.toNanos();
    this.http = HttpClient.newBuilder().connectTimeout(timeout).build();
  }

  /**
   * The {@code ready} command, {@code args[0]} being "ready": needs no Flink on the class path, so
   * that the jar's launcher runs it in its own JVM (a probe runs every few seconds). Exit 2 on a bad
   * command line.
   */
  static int command(String[] args, PrintStream out, PrintStream err) {
    if (args.length > 1 && args[1].equals("--help")) {
      out.println("Usage: java -jar geofence-job.jar ready --rest-url URL [--job NAME] [--timeout D]\n\n" + OPTIONS_HELP);
      return 0;
    }
    try {
      Set<String> names = OPTIONS.stream().map(Option::name).collect(Collectors.toSet());
      return run(CommandArguments.parse(args, 1, names, Set.of()).options(), out);
    } catch (IllegalArgumentException e) {
      err.println("geofence: " + e.getMessage());
      return 2;
    }
  }

  static int run(Map<String, String> options, PrintStream out) {
    String restUrl = options.getOrDefault(REST_URL.name(), "").replaceAll("/+$", "");
    if (restUrl.isBlank()) {
      throw new IllegalArgumentException("option --rest-url is required (see --help)");
    }
    if (!isHttpUrl(restUrl)) {
      throw new IllegalArgumentException("option --rest-url must look like http://host:8081, got '" + restUrl + "'");
    }
    Duration timeout = duration(TIMEOUT.name(), options.getOrDefault(TIMEOUT.name(), TIMEOUT.defaultValue()));
    if (timeout.isZero()) {
      throw new IllegalArgumentException("option --timeout must be longer than 0");
    }
    Answer answer = ask(restUrl, options.get(JOB.name()), timeout);
    out.println(answer.line());
    return answer.ready() ? 0 : 1;
  }

  /** The probe's answer: whether the index is ready, and the one line that says so or why not. */
  record Answer(boolean ready, String line) {}

  /** Asks once; {@code job} is a name or id, or null for the only running job. */
  static Answer ask(String restUrl, String job, Duration timeout) {
    try {
      return new Answer(true, "ready: " + new ReadinessProbe(restUrl, job, timeout).check());
    } catch (NotReady e) {
      return new Answer(false, "not ready: " + e.getMessage());
    }
  }

  private String check() throws NotReady {
    String jobId = runningJob();
    JsonNode vertex = null;
    JsonNode handover = null;
    for (JsonNode v : get("/jobs/" + jobId).path("vertices")) {
      // The handover operator is chained after the fence index: usually one vertex names both.
      if (vertex == null && v.path("name").asText().contains(VERTEX)) {
        vertex = v;
      }
      if (handover == null && v.path("name").asText().contains(GeofenceJob.HANDOVER_NAME)) {
        handover = v;
      }
    }
    if (vertex == null) {
      throw new NotReady("job " + jobId + " has no operator named '" + VERTEX + "'; is it the geofence job?");
    }
    String base = "/jobs/" + jobId + "/vertices/" + vertex.path("id").asText();
    // Until a subtask has restored its state it has not opened, so it has no gauges yet, and the
    // metric store may still hold a previous attempt's values.
    List<String> notReady = new ArrayList<>();
    JsonNode subtasks = get(base).path("subtasks");
    if (subtasks.isEmpty()) {
      throw new NotReady("Flink's REST API lists no subtasks of the fence index of job " + jobId);
    }
    for (JsonNode subtask : subtasks) {
      String status = subtask.path("status").asText();
      if (!status.equals("RUNNING")) {
        notReady.add("subtask " + subtask.path("subtask").asInt() + " " + status.toLowerCase(Locale.ROOT));
      }
    }
    if (!notReady.isEmpty()) {
      throw new NotReady(String.join("; ", notReady));
    }

    // Metric ids carry the operator's scope as Flink formats it, so match them by name.
    Map<String, String> ids = new HashMap<>();
    for (JsonNode metric : get(base + "/subtasks/metrics")) {
      String id = metric.path("id").asText();
      for (String gauge : GAUGES) {
        if (id.endsWith("." + gauge)) {
          ids.put(gauge, id);
        }
      }
    }
    if (!ids.containsKey(FenceIndexMetrics.INDEX_READY)) {
      throw new NotReady("the fence index has no index_ready metric yet" + FETCHED);
    }
    String query = ids.values().stream().map(id -> URLEncoder.encode(id, StandardCharsets.UTF_8)).collect(Collectors.joining(","));
    long fences = 0;
    for (JsonNode subtask : subtasks) {
      int index = subtask.path("subtask").asInt();
      Map<String, String> values = new HashMap<>();
      for (JsonNode metric : get(base + "/subtasks/" + index + "/metrics?get=" + query)) {
        values.put(metric.path("id").asText(), metric.path("value").asText());
      }
      Map<String, Double> gauges = new HashMap<>();
      ids.forEach((gauge, id) -> {
        Double value = number(values.get(id));
        if (value != null) {
          gauges.put(gauge, value);
        }
      });
      Double ready = gauges.get(FenceIndexMetrics.INDEX_READY);
      if (ready == null) {
        throw new NotReady("subtask " + index + " of the fence index has no index_ready metric yet" + FETCHED);
      }
      if (ready != 1) {
        notReady.add(reason(index, gauges, values.get(ids.get(FenceIndexMetrics.BUCKETS_UNMATCHED_LIST))));
      }
      fences += gauges.getOrDefault(FenceIndexMetrics.FENCES_LOADED, 0.0).longValue();
    }
    if (!notReady.isEmpty()) {
      throw new NotReady(String.join("; ", notReady));
    }
    return subtasks.size() + " of " + subtasks.size() + " subtasks, " + fences + " fences" + role(jobId, handover);
  }

  /**
   * What this instance writes, from the handover operator's gauge, as "; ..." (nothing for a job
   * without a handover, or before the gauge is fetched): a standby is ready without writing.
   */
  private String role(String jobId, JsonNode handover) throws NotReady {
    if (handover == null) {
      return "";
    }
    String base = "/jobs/" + jobId + "/vertices/" + handover.path("id").asText();
    for (JsonNode metric : get(base + "/subtasks/metrics")) {
      String id = metric.path("id").asText();
      if (id.endsWith("." + HandoverMetrics.ROLE)) {
        for (JsonNode value : get(base + "/subtasks/0/metrics?get=" + URLEncoder.encode(id, StandardCharsets.UTF_8))) {
          Double code = number(value.path("value").asText());
          String words = code == null ? null : HandoverMetrics.roleWords(code.intValue());
          return words == null ? "" : "; " + words;
        }
      }
    }
    return "";
  }

  /** The id of the job to ask about: the one named or given by id, or else the only running one. */
  private String runningJob() throws NotReady {
    List<String> running = new ArrayList<>();
    String stopped = null;
    for (JsonNode j : get("/jobs/overview").path("jobs")) {
      String id = j.path("jid").asText();
      String state = j.path("state").asText();
      if (job != null && !job.equals(id) && !job.equals(j.path("name").asText())) {
        continue;
      }
      if (state.equals("RUNNING")) {
        running.add(id);
      } else {
        stopped = state;
      }
    }
    if (running.size() == 1) {
      return running.get(0);
    }
    if (job == null) {
      throw new NotReady(running.isEmpty()
          ? "no job is running at " + restUrl
          : running.size() + " jobs are running at " + restUrl + "; name one with --job");
    }
    if (!running.isEmpty()) {
      throw new NotReady(running.size() + " running jobs are named '" + job + "'; give the job id with --job");
    }
    throw new NotReady(stopped == null
        ? "no job named or with id '" + job + "' at " + restUrl
        : "job '" + job + "' is not running (" + stopped + ")");
  }

  /**
   * One subtask's line: its phase and how long it has lasted, and what it waits for; for a subtask
   * whose buckets differ from the source, which ones ({@code unmatchedList}, null if not reported)
   * and the re-reads done.
   */
  private static String reason(int index, Map<String, Double> gauges, String unmatchedList) {
    List<String> state = new ArrayList<>();
    if (gauges.getOrDefault(FenceIndexMetrics.GAP_DETECTED, 0.0) == 1) {
      state.add("gap detected");
    }
    Double code = gauges.get(FenceIndexMetrics.LOAD_PHASE);
    LoadPhase phase = code == null ? null : LoadPhase.ofCode(code.intValue());
    Double phaseMillis = gauges.get(FenceIndexMetrics.PHASE_MS);
    if (phase != null) {
      state.add(phase + (phaseMillis == null ? "" : " for " + seconds(phaseMillis)));
    }
    List<String> details = new ArrayList<>();
    Double completeness = gauges.get(FenceIndexMetrics.COMPLETENESS);
    if (completeness != null && completeness < 1) {
      details.add(String.format(Locale.ROOT, "completeness %.2f", completeness));
    }
    double unmatched = gauges.getOrDefault(FenceIndexMetrics.BUCKETS_UNMATCHED, 0.0);
    if (unmatched > 0) {
      details.add((long) unmatched + " buckets unmatched"
          + ((phase == LoadPhase.VERIFYING || phase == LoadPhase.REREADING) && unmatchedList != null && !unmatchedList.isBlank()
              ? ": " + unmatchedList : ""));
    }
    double reread = gauges.getOrDefault(FenceIndexMetrics.BUCKETS_REREAD, 0.0);
    if (reread > 0 && (phase == LoadPhase.VERIFYING || phase == LoadPhase.REREADING)) {
      double notMatched = gauges.getOrDefault(FenceIndexMetrics.BUCKETS_REREAD_UNMATCHED, 0.0);
      details.add((long) reread + " bucket re-reads" + (notMatched > 0
          ? ", " + (long) notMatched + " of them not matching (retried with backoff)" : ""));
    }
    double lag = gauges.getOrDefault(FenceIndexMetrics.CATCHUP_LAG_MS, -1.0);
    if (phase == LoadPhase.CATCHING_UP && lag >= 0) {
      details.add(String.format(Locale.ROOT, "%.1f s behind", lag / 1000));
    }
    return "subtask " + index + " " + (state.isEmpty() ? "not ready" : String.join(", ", state))
        + (details.isEmpty() ? "" : " (" + String.join(", ", details) + ")");
  }

  /** Milliseconds as a person reads them: "950 ms", "12.4 s", "3 min 20 s". */
  static String seconds(double millis) {
    if (millis < 1000) {
      return (long) millis + " ms";
    }
    if (millis < 60_000) {
      return String.format(Locale.ROOT, "%.1f s", millis / 1000);
    }
    long s = (long) (millis / 1000);
    return s / 60 + " min " + s % 60 + " s";
  }

  /**
   * A duration written as Flink writes them ({@code TimeUtils}: a whole number and an optional
   * unit, milliseconds without one), which this Flink-free probe cannot ask Flink to parse;
   * ReadinessProbeTest holds it to {@code TimeUtils} over every unit.
   */
  static Duration duration(String option, String text) {
    Matcher m = DURATION.matcher(text.strip().toLowerCase(Locale.ROOT));
    ChronoUnit unit = m.matches() ? UNITS.get(m.group(2)) : null;
    if (unit == null) {
      throw new IllegalArgumentException("option --" + option + " must be a duration like 500 ms, 10 s, 5 min or 1 h, got '" + text + "'");
    }
    try {
      return Duration.of(Long.parseLong(m.group(1)), unit);
    } catch (ArithmeticException | NumberFormatException e) {
      throw new IllegalArgumentException("option --" + option + " is too long a duration: '" + text + "'");
    }
  }

  private static final Pattern DURATION = Pattern.compile("(\\d+)\\s*(\\p{L}*)");
  private static final Map<String, ChronoUnit> UNITS = units();

  private static Map<String, ChronoUnit> units() {
    Map<String, ChronoUnit> units = new HashMap<>();
    units.put("", ChronoUnit.MILLIS);
    Map<ChronoUnit, String[]> labels = Map.of(
        ChronoUnit.DAYS, new String[] {"d", "day"},
        ChronoUnit.HOURS, new String[] {"h", "hour"},
        ChronoUnit.MINUTES, new String[] {"min", "m", "minute"},
        ChronoUnit.SECONDS, new String[] {"s", "sec", "secs", "second"},
        ChronoUnit.MILLIS, new String[] {"ms", "milli", "millis", "millisecond"},
        ChronoUnit.MICROS, new String[] {"µs", "micro", "micros", "microsecond"},
        ChronoUnit.NANOS, new String[] {"ns", "nano", "nanos", "nanosecond"});
    labels.forEach((unit, names) -> {
      for (String name : names) {
        units.put(name, unit);
      }
      // Flink also takes the plural of the unit's last, longest name.
      units.put(names[names.length - 1] + "s", unit);
    });
    return units;
  }

  private static boolean isHttpUrl(String url) {
    try {
      return url.matches("https?://[^/?#]+(/[^?#]*)?") && URI.create(url).getHost() != null;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  private static Double number(String value) {
    try {
      return value == null ? null : Double.valueOf(value);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  private JsonNode get(String path) throws NotReady {
    long left = deadline - System.nanoTime();
    if (left <= 0) {
      throw new NotReady("Flink's REST API at " + restUrl + " did not answer within " + timeout.toMillis() + " ms");
    }
    HttpRequest request = HttpRequest.newBuilder(URI.create(restUrl + path)).timeout(Duration.ofNanos(left)).build();
    HttpResponse<String> response;
    try {
      response = http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (HttpTimeoutException e) {
      throw new NotReady("Flink's REST API at " + restUrl + " did not answer within " + timeout.toMillis() + " ms");
    } catch (IOException e) {
      throw new NotReady("cannot reach Flink's REST API at " + restUrl + " (" + why(e) + ")");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new NotReady("interrupted while asking Flink's REST API at " + restUrl);
    }
    if (response.statusCode() != 200) {
      throw new NotReady("Flink's REST API at " + restUrl + " answered HTTP " + response.statusCode() + " to GET " + path);
    }
    try {
      return JSON.readTree(response.body());
    } catch (JsonProcessingException e) {
      throw new NotReady(restUrl + " did not answer GET " + path + " with JSON; is it Flink's REST API?");
    }
  }

  /** The HTTP client's exceptions for a refused connection or an unknown host carry no message. */
  static String why(IOException e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof UnresolvedAddressException || t instanceof UnknownHostException) {
        return "unknown host";
      }
      if (t.getMessage() != null) {
        return t.getMessage();
      }
    }
    return e instanceof ConnectException ? "could not connect" : e.getClass().getSimpleName();
  }

  /** Why the index is not ready, or why that cannot be told; the message is the probe's answer. */
  private static final class NotReady extends Exception {
    private static final long serialVersionUID = 1L;

    NotReady(String message) {
      super(message);
    }
  }
}
