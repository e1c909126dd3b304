package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.config.GeofenceOptions;
import java.io.File;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The job on a Flink session cluster of separate processes, driven exactly as users drive it:
 * {@code docker/session-cluster start} runs a JobManager and a TaskManager from the Flink jars the
 * build puts in {@code job/target/lib}; the job jar goes in through Flink's own CLI frontend
 * ({@code flink run -d}), is stopped with a savepoint ({@code flink stop --savepointPath}) and
 * resubmitted from it ({@code flink run -s}) after fence edits made while it was down. The
 * triggers must equal the oracle's (none lost, none written twice, the edits' EXITs included), and
 * {@code hydration_history} must show, for the jobs the CLI reported, one fresh warm-up per subtask
 * and then one savepoint restore per subtask whose gap check found the stream covering it.
 */
class SessionClusterITCase extends EndToEndFixture {

  private static final String SLOT = "slot_session";
  private static final Pattern JOB_ID = Pattern.compile("Job has been submitted with JobID ([0-9a-f]{32})");
  private static final Pattern SAVEPOINT = Pattern.compile("Savepoint completed\\. Path: (\\S+)");

  /** The module directory, where surefire runs; the script and the job's build are found from it. */
  private final Path module = Path.of("").toAbsolutePath();
  private final Path script = module.resolve("session-cluster");
  private final Path jobJar = module.resolve("../job/target/geofence-job.jar").normalize();
  private Path cluster;

  @Test
  void theJobJarRunsStopsWithASavepointAndRestoresThroughFlinksCli() throws Exception {
    assertThat(jobJar).as("the job jar; build the job module first (mvn -B -DskipTests install -pl state,connectors,job)").exists();
    assertThat(module.resolve("../job/target/lib")).as("Flink's jars next to the job jar (the job module's package phase)").isDirectory();
    cluster = temp.resolve("cluster");
    try {
      sessionCluster("start", cluster.toString(), "--rest-port", Integer.toString(freePort()),
          "--rpc-port", Integer.toString(freePort()), "--slots", "2");
      runAndRestore();
    } catch (Throwable e) {
      printLogTails();
      throw e;
    } finally {
      sessionCluster("stop", cluster.toString());
    }
  }

  private void runAndRestore() throws Exception {
    String url = createDatabase(embeddedServerUrl(), password, "geofence_session", false);
    try (Connection db = DriverManager.getConnection(url, user, password)) {
      SplittableRandom random = new SplittableRandom(31);
      placeFences(db, random, 0, 30);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      List<String> sentinels = new ArrayList<>();

      String first = submit(url, inbox, null);
      sentinels.add(awaitStreaming(db, SLOT, inbox));
      List<Location> moved = moveObjects(db, inbox, random, 1, inside);
      awaitTriggers(db, expected.size());
      String savepoint = stopWithSavepoint(db, first);

      // Edits the restored job can only learn from the slot: reshapes, deletes (their objects
      // EXIT), new fences.
      awaitClockPast(db, moved);
      placeFences(db, random, 0, 6);
      deleteFences(db, 6, 12, inside);
      createFences(db, random, 30, 34);

      // Locations arrive while the restored job warms up: held until its index is complete.
      String second = submit(url, inbox, savepoint);
      moveObjects(db, inbox, random, 2, inside);
      sentinels.add(awaitStreaming(db, SLOT, inbox));
      Set<String> actual = awaitTriggers(db, expected.size());
      assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
      assertThat(queryLong(db, "SELECT count(*) FROM geofence_triggers")).as("no trigger written twice").isEqualTo(expected.size());
      sentinels.forEach(s -> inside.put(s, Set.of("sentinel")));
      assertThat(presence(db)).isEqualTo(flatten(inside));

      List<Episode> episodes = episodes(db);
      assertThat(episodes).filteredOn(e -> e.jobId.equals(first)).as("the first job's warm-ups: %s", episodes)
          .allSatisfy(e -> assertThat(e.startMode).isEqualTo("fresh"))
          .allSatisfy(EndToEndFixture::assertHydrated)
          .extracting(e -> e.subtask).containsExactlyInAnyOrder(0, 1);
      assertThat(episodes).filteredOn(e -> e.jobId.equals(second)).as("the restored job's warm-ups: %s", episodes)
          .allSatisfy(e -> {
            assertThat(e.startMode).isEqualTo("savepoint");
            assertThat(e.gapCheck).isEqualTo("covered");
          })
          .allSatisfy(EndToEndFixture::assertHydrated)
          .extracting(e -> e.subtask).containsExactlyInAnyOrder(0, 1);
    }
  }

  /** Submits the job jar detached, from {@code savepoint} unless it is null; returns the job id. */
  private String submit(String url, Path inbox, String savepoint) throws Exception {
    List<String> args = new ArrayList<>(List.of("flink", cluster.toString(), "run", "-d"));
    if (savepoint != null) {
      args.addAll(List.of("-s", savepoint));
    }
    args.addAll(List.of(jobJar.toString(), "run",
        "--source-url", url, "--source-user", user, "--slot", SLOT,
        "--locations", "file:" + inbox,
        "--parallelism", "2",
        "--checkpoint-interval", "1s", "--heartbeat-interval", "300ms",
        "--state-backend", "rocksdb",
        "--checkpoint-dir", temp.resolve("checkpoints").toUri().toString(),
        "--savepoint-dir", temp.resolve("savepoints").toUri().toString()));
    return find(JOB_ID, sessionCluster(args.toArray(String[]::new)));
  }

  /**
   * Stops the job with a savepoint through the CLI and waits until its CDC source has let go of
   * the slot, so that edits made next reach the restored job only through its catch-up.
   */
  private String stopWithSavepoint(Connection db, String jobId) throws Exception {
    String savepoint = find(SAVEPOINT, sessionCluster("flink", cluster.toString(),
        "stop", "--savepointPath", temp.resolve("savepoints").toUri().toString(), jobId));
    assertThat(Path.of(URI.create(savepoint))).as("the savepoint the CLI reported").exists();
    long deadline = System.currentTimeMillis() + 30_000;
    while (queryLong(db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + SLOT + "' AND active") > 0) {
      assertThat(System.currentTimeMillis()).as("the stopped job never released its slot").isLessThan(deadline);
      Thread.sleep(100);
    }
    return savepoint;
  }

  /**
   * Runs {@code bash docker/session-cluster ARGS} with the fence database's password in its
   * environment, as a user would; returns its output (also echoed for the build log) and fails
   * with it on a non-zero exit.
   */
  private String sessionCluster(String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("bash", script.toString()));
    command.addAll(List.of(args));
    File output = Files.createTempFile(temp, "session-cluster", ".out").toFile();
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output);
    builder.environment().put(GeofenceOptions.PASSWORD_ENV, password);
    Process process = builder.start();
    boolean exited = process.waitFor(3, TimeUnit.MINUTES);
    if (!exited) {
      process.destroyForcibly();
    }
    String text = Files.readString(output.toPath(), StandardCharsets.UTF_8);
    System.out.println("$ docker/session-cluster " + String.join(" ", args) + "\n" + text);
    assertThat(exited).as("docker/session-cluster %s did not finish within 3 minutes:%n%s", args[0], text).isTrue();
    assertThat(process.exitValue()).as("exit status of docker/session-cluster %s:%n%s", args[0], text).isZero();
    return text;
  }

  private static String find(Pattern pattern, String output) {
    Matcher m = pattern.matcher(output);
    assertThat(m.find()).as("'%s' in:%n%s", pattern, output).isTrue();
    return m.group(1);
  }

  private static int freePort() throws Exception {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  /** The ends of the cluster's logs, so that a failure in CI explains itself. */
  private void printLogTails() throws Exception {
    for (String name : List.of("jobmanager.out", "jobmanager.log", "taskmanager.out", "taskmanager.log", "flink-client.log")) {
      Path log = cluster.resolve("log").resolve(name);
      if (Files.exists(log)) {
        List<String> lines = Files.readAllLines(log, StandardCharsets.ISO_8859_1);
        System.out.println("---- last lines of " + log + "\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 80), lines.size())));
      }
    }
  }
}
