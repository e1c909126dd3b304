package dev.geofence.job.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.config.Flag;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.location.MovingObjects;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.flink.client.deployment.executors.LocalExecutor;
import org.apache.flink.client.program.StreamContextEnvironment;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.DefaultExecutorServiceLoader;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class GeofenceCommandTest {

  private static final String URL = "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x";

  @Test
  void helpDocumentsEveryRunOptionWithItsKeyAndDefault() throws Exception {
    Result r = run("--help");
    assertThat(r.status).isZero();
    for (Flag flag : GeofenceCommand.RUN.flags()) {
      assertThat(r.out).contains("  " + flag.usage(), flag.kind() == Flag.Kind.FAMILY ? flag.key() + "KEY"
          : flag.required() ? flag.key() + ", required" : flag.key() + "; default " + flag.defaultValue());
    }
    assertThat(r.out).contains(GeofenceOptions.PASSWORD_ENV, "--rest-port P", "rest.port; default 8081",
        "execution.checkpointing.interval; default 10 s", "geofence.source.geometry-format; default wkb");
  }

  @Test
  void helpDocumentsTheReadyCommand() throws Exception {
    Result r = run("ready", "--help");
    assertThat(r.status).isZero();
    assertThat(r.out).contains("java -jar geofence-job.jar ready --rest-url URL [--job NAME]", "--timeout D", "default 5 s");
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "run --source-url jdbc:postgresql://h/db --bogus 1 | unknown option --bogus (see --help)",
      "run --source-user u --locations file:/tmp/x | option --source-url (geofence.source.url) is required (see --help)",
      URL + " -Dgeofence.source.urll=x | unknown option geofence.source.urll (see --help)",
      URL + " -Dgeofence.source.url=jdbc:postgresql://h/db | option --source-url (geofence.source.url) is given twice (also as -Dgeofence.source.url)",
      URL + " -D geofence.source.slot | -D needs KEY=VALUE, got '-D geofence.source.slot'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations ftp:x | --locations must start with kafka:, file:, generator: or fleet:, got 'ftp:x'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations fleet:10,every=soon | --locations fleet: must be fleet:OBJECTS[,every=D][,speed=M/S][,box=MINLON/MINLAT/MAXLON/MAXLAT][,start=T], got 'fleet:10,every=soon'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations fleet:10,start=yesterday | --locations fleet: must be fleet:OBJECTS[,every=D][,speed=M/S][,box=MINLON/MINLAT/MAXLON/MAXLAT][,start=T], got 'fleet:10,start=yesterday'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations fleet:10,box=1/1/0/0 | the fleet's bounding box is empty",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations generator:ten | --locations generator: must be generator:OBJECTS[,start=T], got 'generator:ten'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations generator:10,every=2s | --locations generator: must be generator:OBJECTS[,start=T], got 'generator:10,every=2s'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations generator:10,start=soon | --locations generator: must be generator:OBJECTS[,start=T], got 'generator:10,start=soon'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations generator:0 | the generator needs at least one object, got 0",
      URL + " --sink-batch-size 0 | the sink batch size must be at least 1, got 0",
      URL + " --evaluation-batch-size 0 | the evaluation batch size must be at least 1, got 0",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations kafka:onlyhost | --locations kafka: must be BOOTSTRAP/TOPIC (e.g. kafka:9092/geofence-triggers), got 'onlyhost'",
      URL + " --triggers-topic kafka:9092 | --triggers-topic must be BOOTSTRAP/TOPIC (e.g. kafka:9092/geofence-triggers), got 'kafka:9092'",
      URL + " --triggers-topic k:9092/t --triggers-transactional-id  | option --triggers-transactional-id needs a value",
      "run --source-url mysql://h/db --source-user u --locations file:/x | the fence database URL must look like jdbc:postgresql://host:port/database, got mysql://h/db",
      "run --slot | option --slot needs a value",
      "launch | unknown command 'launch'; the commands are run, demo, ready and deploy (see --help)",
      "ready --job geofence | option --rest-url is required (see --help)",
      "ready --rest-url localhost:8081 | option --rest-url must look like http://host:8081, got 'localhost:8081'",
      "ready --rest-url http://localhost:8081 --timeout 0s | option --timeout must be longer than 0",
      "ready --rest-url http://localhost:8081 --timeout 1.5s | option --timeout must be a duration like 500 ms, 10 s, 5 min or 1 h, got '1.5s'",
      URL + " --state-backend memory | option --state-backend (state.backend.type) must be hashmap or rocksdb, got 'memory'",
      URL + " --checkpoint-interval soon | option --checkpoint-interval (execution.checkpointing.interval) must be a duration like 500 ms, 10 s, 5 min, 1 h or 30 d, got 'soon'",
      URL + " -Dexecution.checkpointing.interval=soon | option --checkpoint-interval (execution.checkpointing.interval) must be a duration like 500 ms, 10 s, 5 min, 1 h or 30 d, got 'soon'",
      URL + " --parallelism two | option --parallelism (parallelism.default) must be a whole number, got 'two'",
      URL + " --geometry-format svg | option --geometry-format (geofence.source.geometry-format) must be wkb, wkt or geojson, got 'svg'",
      URL + " --startup later | option --startup (geofence.source.startup) must be snapshot or slot, got 'later'",
      "run --source-url jdbc:postgresql://h/db --source-user u --slot bad-name! --locations file:/x | the replication slot 'bad-name!' is not a plain SQL identifier (letters, digits and _, at most 63)",
      URL + " --id-column fence-id | the id column 'fence-id' is not a plain SQL identifier (letters, digits and _, at most 63)",
      URL + " --checkpoint-interval 1s --heartbeat-interval 5s | option --heartbeat-interval (geofence.source.heartbeat-interval) must be shorter than three checkpoint intervals (3000 ms)",
      URL + " --checkpoint-interval 1s -Dgeofence.source.heartbeat-interval=5000 | option --heartbeat-interval (geofence.source.heartbeat-interval) must be shorter than three checkpoint intervals (3000 ms)",
      URL + " --hydration-retention 0ms | the hydration history retention must be at least 1 ms, got 0 ms",
      "ready --rest-url http://localhost:8081 --bogus 1 | unknown option --bogus (see --help)",
  })
  void badCommandLinesFailWithOneSentence(String args, String message) throws Exception {
    Result r = run(args.split(" "));
    assertThat(r.status).isEqualTo(2);
    assertThat(r.err.strip()).isEqualTo("geofence: " + message);
  }

  /**
   * A fleet's timeline starts at the job's start unless {@code start=} names it, as epoch
   * milliseconds or an instant, so that a restored fleet goes on where its savepoint left it.
   */
  @Test
  void aFleetStartsWhereItsStartSaysOrAtTheJobsStart() {
    assertThat(GeofenceCommand.fleet("10", 42).time(0)).isEqualTo(42);
    assertThat(GeofenceCommand.fleet("10,start=1764547200000", 42).time(0)).isEqualTo(1764547200000L);
    assertThat(GeofenceCommand.fleet("10,every=2s,start=2025-12-01T00:00:00Z", 42).time(10)).isEqualTo(1764547202000L);
  }

  /**
   * A generator's timeline is fixed for the job, so that a replay emits the same lines: at {@code
   * start=} if given, as epoch milliseconds or an instant; else at the job's start, or, restored
   * from a savepoint that had reached location n, so that n is stamped at the job's start.
   */
  @Test
  void aGeneratorsTimelineIsFixedAtItsStartOrWhereItsSavepointLeftIt() throws Exception {
    long now = 1_800_000_000_000L;
    assertThat(GeofenceCommand.generator("10", now, -1).objects().location(0).timestamp).isEqualTo(now);
    assertThat(GeofenceCommand.generator("10", now, 36_005).objects().location(36_005).timestamp)
        .as("an hour of laps into the sequence, stamped now").isEqualTo(now);
    assertThat(GeofenceCommand.generator("10", now, 36_005).objects().location(36_015).timestamp).isEqualTo(now + 1000);
    assertThat(GeofenceCommand.generator("10,start=1764547200000", now, 36_005).objects().location(25).timestamp)
        .as("start= wins").isEqualTo(1764547202000L);
    assertThat(GeofenceCommand.generator("10,start=2025-12-01T00:00:00Z", now, -1).map(25L))
        .isEqualTo(new MovingObjects(10, 0, 0, 10, 10, 1764547200000L, 1000).line(25));
  }

  /**
   * Under {@code flink run} the program's {@code main} sees the client's configuration: the
   * cluster's {@code config.yaml} with Flink's {@code -D}. A geofence key there is read as its
   * flag would be, and a bad one is refused the same way.
   */
  @Test
  void aKeyOfTheClustersConfigurationIsReadLikeItsFlag() throws Exception {
    Result r = underClient(Map.of("geofence.source.heartbeat-interval", "soon"), URL.split(" "));
    assertThat(r.status).isEqualTo(2);
    assertThat(r.err.strip()).isEqualTo("geofence: option --heartbeat-interval (geofence.source.heartbeat-interval) must be a"
        + " duration like 500 ms, 10 s, 5 min, 1 h or 30 d, got 'soon'");
    r = underClient(Map.of("geofence.locations.sourc", "file:/x"), URL.split(" "));
    assertThat(r.err.strip()).as("a typo in config.yaml").isEqualTo("geofence: unknown option geofence.locations.sourc (see --help)");
  }

  /** An output database that cannot be reached is said without the URL's parameters, where a password may be. */
  @Test
  void anUnreachableSinkIsToldWithoutItsUrlsParameters() throws Exception {
    Result r = underClient(Map.of(), (URL + " --sink-url jdbc:postgresql://127.0.0.1:1/out?user=w&password=hunter2").split(" "));
    assertThat(r.status).isEqualTo(2);
    assertThat(r.err).startsWith("geofence: cannot prepare the output tables at jdbc:postgresql://127.0.0.1:1/out?...: ")
        .doesNotContain("hunter2");
  }

  /** A job starts as a standby or in an ended writer's seat, never both: refused before anything starts. */
  @Test
  void aStandbyCannotAlsoResumeAWriter() throws Exception {
    Result r = underClient(Map.of(), (URL + " --standby --resume-writer 7e4cc054f46b8a64634119145b0b2efa").split(" "));
    assertThat(r.status).isEqualTo(2);
    assertThat(r.err.strip()).isEqualTo("geofence: options --standby (geofence.handover.standby) and --resume-writer"
        + " (geofence.handover.resume-writer) exclude each other: a job starts as a standby or in a writer's seat");
  }

  @Test
  void slotsPerSavepointDecideTheStartAloneAndAreNotDeploys() throws Exception {
    Result standby = underClient(Map.of(), (URL + " --savepoint-slots --standby").split(" "));
    assertThat(standby.status).isEqualTo(2);
    assertThat(standby.err.strip()).isEqualTo("geofence: option --savepoint-slots (geofence.handover.savepoint-slots) decides"
        + " from the savepoint whether the job starts as a standby: not with --standby (geofence.handover.standby) or"
        + " --resume-writer (geofence.handover.resume-writer)");
    Result deploy = underClient(Map.of(), ("deploy --rest-url http://localhost:1 --from-job 7e4cc054f46b8a64634119145b0b2efa"
        + " --new-slot geofence_2 --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --savepoint-slots").split(" "));
    assertThat(deploy.status).isEqualTo(2);
    assertThat(deploy.err.strip()).isEqualTo("geofence: option --savepoint-slots (geofence.handover.savepoint-slots) is for"
        + " deploys made of savepoints alone (the Kubernetes operator's blue/green); deploy copies the slot itself: leave it out");
  }

  /**
   * The job built from options given three ways at once, over a real database (the output
   * migration runs): the cluster's configuration names the locations (a generator, read by one
   * reader) and the job's name; {@code -D} the checkpoint interval; flags the database and the
   * parallelism, and a flag beats the cluster's value of its key. The embedded cluster's managed
   * memory is the job's default unless {@code -D} sets it.
   */
  @Test
  void flagsDashDKeysAndTheClustersConfigurationAllReachTheJob() throws Exception {
    try (EmbeddedPostgres postgres = EmbeddedPostgres.builder().start()) {
      String url = "jdbc:postgresql://localhost:" + postgres.getPort() + "/postgres";
      Configuration cluster = Configuration.fromMap(Map.of(
          "geofence.locations.source", "generator:5", "pipeline.name", "from-config-yaml"));
      StreamExecutionEnvironment env = underClient(cluster, () -> GeofenceCommand.prepare(GeofenceCommand.RUN.parse(new String[] {
          "--source-url", url, "--source-user", "postgres", "--parallelism", "3", "-Dexecution.checkpointing.interval=7 s"}, 0), ""));
      StreamGraph graph = env.getStreamGraph();
      assertThat(graph.getJobName()).isEqualTo("from-config-yaml");
      assertThat(graph.getCheckpointConfig().getCheckpointInterval()).isEqualTo(7000);
      assertThat(env.getParallelism()).isEqualTo(3);
      assertThat(graph.getStreamNodes().stream().filter(n -> n.getOperatorName().contains("Location lines"))
          .mapToInt(StreamNode::getParallelism)).as("a generator's one reader").containsExactly(1);

      assertThat(env.getConfiguration().get(TaskManagerOptions.MANAGED_MEMORY_SIZE))
          .as("RocksDB's memory in an embedded cluster").isEqualTo(GeofenceCommand.EMBEDDED_MANAGED_MEMORY);

      env = underClient(cluster, () -> GeofenceCommand.prepare(GeofenceCommand.RUN.parse(new String[] {
          "--source-url", url, "--source-user", "postgres", "--job-name", "from-the-flag", "--locations", "file:/tmp/nowhere",
          "-Dtaskmanager.memory.managed.size=256m"}, 0), ""));
      assertThat(env.getStreamGraph().getJobName()).isEqualTo("from-the-flag");
      assertThat(env.getConfiguration().get(TaskManagerOptions.MANAGED_MEMORY_SIZE)).isEqualTo(MemorySize.parse("256m"));
    }
  }

  /** Runs {@code body} with a program context as {@code flink run} sets one up, over {@code cluster}. */
  private static <T> T underClient(Configuration cluster, Body<T> body) throws Exception {
    Configuration client = new Configuration(cluster);
    client.set(DeploymentOptions.TARGET, LocalExecutor.NAME);
    StreamContextEnvironment.setAsContext(new DefaultExecutorServiceLoader(), client, GeofenceCommandTest.class.getClassLoader(), false, false);
    try {
      return body.run();
    } finally {
      StreamContextEnvironment.unsetAsContext();
    }
  }

  private static Result underClient(Map<String, String> cluster, String... args) throws Exception {
    return underClient(Configuration.fromMap(cluster), () -> run(args));
  }

  private interface Body<T> {
    T run() throws Exception;
  }

  private record Result(int status, String out, String err) {}

  private static Result run(String... args) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = GeofenceCommand.run(args, new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }
}
