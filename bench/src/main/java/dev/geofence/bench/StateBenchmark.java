package dev.geofence.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.job.GeofenceJob;
import dev.geofence.job.JobSettings;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * The fence index's state alone, without a database: the job's own data flow and operator, fed by
 * {@link BenchFences}, on an embedded cluster, with whatever state configuration is given as
 * {@code --conf key=value}. Two steps, each in a JVM of its own (so that heap figures are its own):
 *
 * <ul>
 *   <li>{@code load}: loads the fences (time to ready, heap), then runs edits at a steady rate for
 *       a window of checkpoints (their sizes), then stops with a savepoint (its size);
 *   <li>{@code restore SAVEPOINT}: restores from it and reports the warm-up's phases (restored,
 *       indexed, ready, from the operator's hydration episode) and the heap, peak and steady.
 * </ul>
 *
 * Each prints {@code key=value} lines for {@code bench/state} to tabulate.
 */
public final class StateBenchmark {

  private static final Queue<HydrationEpisode> EPISODES = new ConcurrentLinkedQueue<>();
  private static final ObjectMapper JSON = new ObjectMapper();

  private StateBenchmark() {}

  public static void main(String[] args) throws Exception {
    String step = args[0];
    int fences = 1_200_000;
    int parallelism = 2;
    int editSeconds = 60;
    double editsPerSecond = 40;
    String savepoint = null;
    String format = "CANONICAL";
    Path dir = null;
    Configuration conf = new Configuration();
    for (int i = 1; i < args.length; i++) {
      switch (args[i]) {
        case "--fences" -> fences = Integer.parseInt(args[++i]);
        case "--parallelism" -> parallelism = Integer.parseInt(args[++i]);
        case "--edit-seconds" -> editSeconds = Integer.parseInt(args[++i]);
        case "--edits-per-second" -> editsPerSecond = Double.parseDouble(args[++i]);
        case "--savepoint" -> savepoint = args[++i];
        case "--format" -> format = args[++i];
        case "--dir" -> dir = Path.of(args[++i]);
        case "--conf" -> {
          String[] kv = args[++i].split("=", 2);
          conf.setString(kv[0], kv[1]);
        }
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    int restPort = 18600 + (int) (ProcessHandle.current().pid() % 300);
    conf.set(RestOptions.PORT, restPort);
    conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, dir.resolve("checkpoints").toUri().toString());
    // RocksDB's working directories too, so that the candidate's directory holds all it wrote.
    conf.set(CoreOptions.TMP_DIRS, dir.resolve("tmp").toString());
    if (step.equals("restore")) {
      conf.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
    }
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(parallelism);
    env.enableCheckpointing(10_000);
    GeofenceJob.Endpoints endpoints = new GeofenceJob.Endpoints(
        BenchFences.source(fences, editsPerSecond),
        LocationSources.generator(new MovingObjects.Lines(new MovingObjects(100, 0, 0, 1, 1, System.currentTimeMillis(), 1000))),
        new DiscardingSink<>(), new DiscardingSink<>(), new DiscardingSink<>(), new Episodes(),
        new DiscardingSink<>(), Duration.ofSeconds(1), null);
    GeofenceJob.build(env, endpoints, JobSettings.defaults());
    long submitted = System.currentTimeMillis();
    JobClient job = env.executeAsync("state-bench");
    String base = "http://localhost:" + restPort + "/jobs/" + job.getJobID();
    HttpClient http = HttpClient.newHttpClient();

    List<HydrationEpisode> ready = awaitReady(parallelism, TimeUnit.MINUTES.toMillis(30));
    long installed = ready.stream().mapToLong(e -> e.installedAt).min().orElseThrow();
    long hydrated = ready.stream().mapToLong(e -> e.hydratedAt).max().orElseThrow();
    long peak = ready.stream().mapToLong(e -> e.peakHeapBytes).max().orElseThrow();
    print("submitted_to_ready_s", (hydrated - submitted) / 1000.0);
    print("installed_to_ready_s", (hydrated - installed) / 1000.0);
    if (step.equals("restore")) {
      print("installed_to_restored_s", (ready.stream().mapToLong(e -> e.restoredAt).max().orElseThrow() - installed) / 1000.0);
      print("installed_to_indexed_s", (ready.stream().mapToLong(e -> e.indexedAt).max().orElseThrow() - installed) / 1000.0);
    }
    print("fences_loaded", ready.stream().mapToLong(e -> e.fencesLoaded).sum());
    print("peak_heap_bytes", peak);
    print("steady_heap_bytes", steadyHeap());

    if (step.equals("load")) {
      // A checkpoint of the state as loaded, then the edit window's checkpoints.
      long first = awaitCheckpointAfter(http, base, -1);
      print("checkpoint_full_bytes", checkpoint(http, base, first).path("checkpointed_size").asLong());
      Thread.sleep(editSeconds * 1000L);
      long last = awaitCheckpointAfter(http, base, first);
      long sum = 0;
      long max = 0;
      int n = 0;
      for (JsonNode c : get(http, base + "/checkpoints").path("history")) {
        long id = c.path("id").asLong();
        if (c.path("status").asText().equals("COMPLETED") && id > first && id <= last) {
          sum += c.path("checkpointed_size").asLong();
          max = Math.max(max, c.path("checkpointed_size").asLong());
          n++;
        }
      }
      print("checkpoints_in_window", n);
      print("checkpoint_incremental_max_bytes", max);
      print("checkpoint_incremental_sum_bytes", sum);
      print("edits_window_s", editSeconds);
      long t = System.currentTimeMillis();
      String path = job.stopWithSavepoint(false, dir.resolve("savepoints").toUri().toString(),
          SavepointFormatType.valueOf(format)).get(30, TimeUnit.MINUTES);
      print("savepoint_s", (System.currentTimeMillis() - t) / 1000.0);
      print("savepoint_bytes", size(Path.of(URI.create(path))));
      print("savepoint", path);
    } else {
      job.cancel().get(5, TimeUnit.MINUTES);
    }
    System.exit(0);
  }

  private static List<HydrationEpisode> awaitReady(int parallelism, long timeoutMs) throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (System.currentTimeMillis() < deadline) {
      List<HydrationEpisode> ready = new ArrayList<>();
      for (HydrationEpisode e : EPISODES) {
        if (e.hydratedAt != 0) {
          ready.add(e);
        }
      }
      if (ready.size() >= parallelism) {
        return ready;
      }
      Thread.sleep(100);
    }
    throw new IllegalStateException("the fence index was not ready within " + timeoutMs + " ms");
  }

  private static long awaitCheckpointAfter(HttpClient http, String base, long after) throws Exception {
    while (true) {
      long id = get(http, base + "/checkpoints").path("latest").path("completed").path("id").asLong(-1);
      if (id > after) {
        return id;
      }
      Thread.sleep(500);
    }
  }

  private static JsonNode checkpoint(HttpClient http, String base, long id) throws Exception {
    return get(http, base + "/checkpoints/details/" + id);
  }

  private static JsonNode get(HttpClient http, String url) throws Exception {
    return JSON.readTree(http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString()).body());
  }

  private static long steadyHeap() {
    System.gc();
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  private static long size(Path dir) throws IOException {
    try (Stream<Path> files = Files.walk(dir)) {
      return files.filter(Files::isRegularFile).mapToLong(p -> p.toFile().length()).sum();
    }
  }

  private static void print(String key, Object value) {
    System.out.println(key + "=" + (value instanceof Double d ? String.format(Locale.ROOT, "%.2f", d) : value));
  }

  /** The hydration episodes, kept in this JVM (the embedded cluster's). */
  private static final class Episodes implements Sink<HydrationEpisode> {
    private static final long serialVersionUID = 1L;

    @Override
    @SuppressWarnings("deprecation")
    public SinkWriter<HydrationEpisode> createWriter(InitContext context) {
      return writer();
    }

    @Override
    public SinkWriter<HydrationEpisode> createWriter(WriterInitContext context) {
      return writer();
    }

    private static SinkWriter<HydrationEpisode> writer() {
      return new SinkWriter<>() {
        @Override
        public void write(HydrationEpisode episode, Context context) {
          EPISODES.removeIf(e -> e.subtask == episode.subtask && e.installedAt == episode.installedAt);
          EPISODES.add(episode);
        }

        @Override
        public void flush(boolean endOfInput) {}

        @Override
        public void close() {}
      };
    }
  }
}
