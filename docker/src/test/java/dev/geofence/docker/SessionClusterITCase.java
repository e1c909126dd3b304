package dev.geofence.docker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.job.testing.EndToEndFixture;
import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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
 * resubmitted from it ({@code flink run -s}) after fence edits made while it was down. Its options
 * come all three ways a cluster's user gives them: the fence database and the locations from the
 * cluster's {@code config.yaml}, the heartbeat as Flink's own {@code -D} before the jar, the slot
 * as {@code -D} after {@code run}, the rest as flags. The triggers must equal the oracle's (none
 * lost, none written twice, the edits' EXITs included), and {@code hydration_history} must show,
 * for the jobs the CLI reported, one fresh warm-up per subtask and then one savepoint restore per
 * subtask whose gap check found the stream covering it. Then a blue/green deploy with the jar's own
 * {@code deploy}, its new job in a TaskManager that {@code docker/session-cluster add-taskmanager}
 * started (the first one's slots hold the running job): the third job takes over, every trigger
 * still once; {@code stop} then stops all three processes.
 */
class SessionClusterITCase extends EndToEndFixture {

  private static final Pattern JOB_ID = Pattern.compile("Job has been submitted with JobID ([0-9a-f]{32})");
  private static final Pattern SAVEPOINT = Pattern.compile("Savepoint completed\\. Path: (\\S+)");
  private static final Pattern DEPLOYED = Pattern.compile("Deployed: job ([0-9a-f]{32})");

  /** The module directory, where surefire runs; the script and the job's build are found from it. */
  private final Path module = Path.of("").toAbsolutePath();
  private final Path script = module.resolve("session-cluster");
  private final Path jobJar = module.resolve("../job/target/geofence-job.jar").normalize();
  private Path cluster;
  private int restPort;

  @Test
  void theJobJarRunsStopsWithASavepointAndRestoresThroughFlinksCli() throws Exception {
    assertThat(jobJar).as("the job jar; build the job module first (mvn -B -DskipTests install -pl state,connectors,job)").exists();
    assertThat(module.resolve("../job/target/lib")).as("Flink's jars next to the job jar (the job module's package phase)").isDirectory();
    database("geofence_session", 31);
    cluster = temp.resolve("cluster");
    try {
      // The job's options in the cluster's configuration, where an operator would keep them.
      restPort = freePort();
      // Two slots, for the running job; the blue/green deploy's new job gets a TaskManager of its own.
      sessionCluster("start", cluster.toString(), "--rest-port", Integer.toString(restPort),
          "--rpc-port", Integer.toString(freePort()), "--slots", "2",
          "-D", "geofence.source.url=" + url, "-D", "geofence.locations.source=file:" + inbox);
      assertThat(Files.readString(cluster.resolve("conf/config.yaml"))).contains("geofence.source.url: ");
      runAndRestore();
      assertThat(sessionCluster("stop", cluster.toString())).as("stop stops every process of the cluster")
          .contains("Stopping the taskmanager-2 (", "Stopping the taskmanager (", "Stopping the jobmanager (");
    } catch (Throwable e) {
      printLogTails();
      throw e;
    } finally {
      sessionCluster("stop", cluster.toString());
    }
  }

  private void runAndRestore() throws Exception {
    placeFences(0, 30);
    String first = submit(null);
    // As the fixture's start does for a fresh job: its snapshot is read before anything moves.
    awaitEvaluated();
    moveObjects();
    assertTriggersAsOracle();
    String savepoint = stopWithSavepoint(first);

    // Edits the restored job can only learn from the slot: reshapes, deletes (their objects
    // EXIT), new fences.
    placeFences(0, 6);
    deleteFences(6, 12);
    createFences(30, 34);

    // Locations arrive while the restored job warms up: held until its index is complete.
    String second = submit(savepoint);
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();

    assertWarmUps(first, 2, "fresh");
    assertThat(assertWarmUps(second, 2, "savepoint")).filteredOn(e -> e.startMode().equals("savepoint"))
        .allSatisfy(e -> assertThat(e.gapCheck()).as("gap check of %s", e).isEqualTo("covered"));
    deployBlueGreen(second);
    assertThePasswordStaysOutOfTheLogs();
  }

  /**
   * The cluster logs everything at INFO, as Flink's usual configuration does; Flink CDC's logger of
   * its Debezium configuration (the password in it) printed nothing, since the job held it at WARN
   * in each TaskManager before a reader started.
   */
  private void assertThePasswordStaysOutOfTheLogs() throws IOException {
    String cdcConfigLogger = "org.apache.flink.cdc.connectors.postgres.source.fetch.PostgresSourceFetchTaskContext";
    StringBuilder logs = new StringBuilder();
    try (var files = Files.list(cluster.resolve("log"))) {
      for (Path log : files.filter(f -> f.getFileName().toString().endsWith(".log")).toList()) {
        logs.append(Files.readString(log, StandardCharsets.ISO_8859_1));
      }
    }
    assertThat(logs).as("the cluster's logs").contains("Held " + cdcConfigLogger + " at WARN")
        .doesNotContain("PostgresConnectorConfig is", "database.password");
  }

  /**
   * A blue/green deploy as a user types it: the jar's {@code deploy}, a process of its own, against
   * the cluster's REST API, with the options the running job shares read from the cluster's
   * configuration. It exits 0 with the new job writing the outputs, restored on a copy of the
   * slot that its gap check finds covering the savepoint, and the old job's slot dropped.
   */
  private void deployBlueGreen(String running) throws Exception {
    // As deployment.md advises: the new job in a TaskManager of its own (the first one's slots
    // hold the running job), so that its restore does not share the running job's heap.
    assertThat(sessionCluster("add-taskmanager", cluster.toString(), "-D", "taskmanager.numberOfTaskSlots=2"))
        .contains("TaskManager 2 running: 2 TaskManagers in the cluster");
    String oldSlot = slot;
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-jar", jobJar.toString(), "deploy", "--rest-url", "http://localhost:" + restPort, "--from-job", running,
        "--new-slot", oldSlot + "_green", "--source-user", user, "-Dgeofence.source.slot=" + oldSlot,
        "--heartbeat-interval", "300ms"));
    command.addAll(jobOptions());
    String text = run(command, 5, "java -jar geofence-job.jar deploy");
    String third = find(DEPLOYED, text);
    assertThat(SlotProbe.read(db, oldSlot).exists()).as("the old job's slot dropped").isFalse();

    slot = oldSlot + "_green";
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertThat(assertWarmUps(third, 2, "savepoint")).allSatisfy(e -> assertThat(e.gapCheck()).as("gap check of %s", e)
        .isEqualTo("covered"));
  }

  /** Submits the job jar detached, from {@code savepoint} unless it is null; returns the job id. */
  private String submit(String savepoint) throws Exception {
    List<String> args = new ArrayList<>(List.of("flink", cluster.toString(), "run", "-d"));
    if (savepoint != null) {
      args.addAll(List.of("-s", savepoint));
    }
    // Flink's own dynamic property, before the jar, as for any of Flink's options.
    args.add("-Dgeofence.source.heartbeat-interval=300 ms");
    args.addAll(List.of(jobJar.toString(), "run", "--source-user", user, "-Dgeofence.source.slot=" + slot));
    args.addAll(jobOptions());
    String id = find(JOB_ID, sessionCluster(args.toArray(String[]::new)));
    runsAt(2);
    return id;
  }

  /**
   * The options every job of the case runs with: a handover row kept (for the blue/green deploy at
   * the end), a short allowed lateness, since the old job of that deploy serves that long past T.
   */
  private List<String> jobOptions() {
    return List.of("--parallelism", "2", "--checkpoint-interval", "1s", "--state-backend", "rocksdb",
        "--checkpoint-dir", temp.resolve("checkpoints").toUri().toString(),
        "--savepoint-dir", temp.resolve("savepoints").toUri().toString(),
        "--handover", "--allowed-lateness", "5s");
  }

  /**
   * Stops the job with a savepoint through the CLI and waits until its CDC source has let go of
   * the slot, so that edits made next reach the restored job only through its catch-up.
   */
  private String stopWithSavepoint(String jobId) throws Exception {
    String savepoint = find(SAVEPOINT, sessionCluster("flink", cluster.toString(),
        "stop", "--savepointPath", temp.resolve("savepoints").toUri().toString(), jobId));
    assertThat(Path.of(URI.create(savepoint))).as("the savepoint the CLI reported").exists();
    awaitSlotReleased();
    return savepoint;
  }

  /** Runs {@code bash docker/session-cluster ARGS}, as {@link #run} runs a command. */
  private String sessionCluster(String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("bash", script.toString()));
    command.addAll(List.of(args));
    return run(command, 3, "docker/session-cluster " + String.join(" ", args));
  }

  /**
   * Runs {@code command} with the fence database's password in its environment, as a user would;
   * returns its output (also echoed for the build log) and fails with it on a non-zero exit or
   * when it takes longer than {@code minutes}.
   */
  private String run(List<String> command, int minutes, String what) throws Exception {
    File output = Files.createTempFile(temp, "command", ".out").toFile();
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output);
    builder.environment().put(GeofenceOptions.PASSWORD_ENV, password);
    Process process = builder.start();
    boolean exited = process.waitFor(minutes, TimeUnit.MINUTES);
    if (!exited) {
      process.destroyForcibly();
    }
    String text = Files.readString(output.toPath(), StandardCharsets.UTF_8);
    System.out.println("$ " + what + "\n" + text);
    assertThat(exited).as("%s did not finish within %d minutes:%n%s", what, minutes, text).isTrue();
    assertThat(process.exitValue()).as("exit status of %s:%n%s", what, text).isZero();
    return text;
  }

  private static String find(Pattern pattern, String output) {
    Matcher m = pattern.matcher(output);
    assertThat(m.find()).as("'%s' in:%n%s", pattern, output).isTrue();
    return m.group(1);
  }

  /**
   * A port free now, below Linux's ephemeral range (32768 and up): the cluster's processes bind
   * ports of that range for themselves while they start, and once took the REST port chosen there
   * before the REST endpoint bound it.
   */
  private static int freePort() throws Exception {
    SplittableRandom random = new SplittableRandom();
    for (int attempt = 0; attempt < 1_000; attempt++) {
      int port = random.nextInt(20_000, 32_000);
      try (ServerSocket socket = new ServerSocket(port)) {
        return socket.getLocalPort();
      } catch (IOException taken) {
        // in use: another one
      }
    }
    throw new IllegalStateException("no free port between 20000 and 32000");
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
