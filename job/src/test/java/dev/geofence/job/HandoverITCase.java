package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.kafka.KafkaBroker;
import dev.geofence.connectors.sink.Handover;
import dev.geofence.connectors.sink.KafkaOutputs;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.job.cli.GeofenceCommand;
import dev.geofence.job.handover.SavepointSlots;
import dev.geofence.job.operator.SavepointFiles;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.time.LocationTimePolicy;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.client.deployment.StandaloneClusterId;
import org.apache.flink.client.program.rest.RestClusterClient;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * A blue/green deploy with the handover, through the real parts: objects cross fences and fences
 * are edited all along, while a second instance starts beside the first from a savepoint taken
 * without stopping, on a slot copied from the first one's, is asked to take over at the first's
 * frozen lease T and does once the first has committed every trigger before T; the first is then
 * cancelled and its slot dropped. A standby killed during its warm-up first changes nothing; an old
 * instance that fails for good during the handover is resumed from its last checkpoint. The
 * triggers in the table and in the topic ({@code read_committed}) are the oracle's, each once; the
 * presence is the oracle's; the index passes the three-way check. Then a classic deploy (stop with
 * a savepoint, restore) under the same workload, for comparison: the test prints the longest
 * stretch of wall time without a trigger written, in steady state and across each deploy.
 */
class HandoverITCase extends EndToEndFixture {

  private static final String JOB = "geofence-it";

  @Test
  void aBlueGreenDeployHandsTheOutputsOverWithEveryTriggerWrittenOnce() throws Exception {
    try (KafkaBroker kafka = KafkaBroker.start()) {
      database("handover", 35);
      // A short lateness: the first instance's share is whole this long after T.
      JobClient blue = startWriter(kafka, Duration.ofSeconds(2));
      String blueSlot = slot;

      try (Arrivals arrivals = new Arrivals(url, kafka.bootstrapServers());
          Connection admin = DriverManager.getConnection(url, "postgres", "")) {
        Workload workload = new Workload();
        long steadyFrom = System.currentTimeMillis();
        Thread.sleep(8_000);
        long steadyTo = System.currentTimeMillis();

        // A standby killed during its warm-up: the running instance serves on, the slot goes.
        JobClient lost = startStandby(kafka, blue, blueSlot, "lost");
        lost.cancel().get();
        Waiting.until("the lost standby to stop", PATIENCE, () -> lost.getJobStatus().get().isGloballyTerminalState());
        awaitDropped(admin, blueSlot + "_lost");
        assertThat(Handover.read(admin, JOB).orElseThrow()).as("the lost standby never asked")
            .extracting(Handover.Row::writer, Handover.Row::nextWriter).containsExactly(blue.getJobID().toString(), null);

        // The deploy: slot, savepoint without a stop, the standby, ready, the handover, the old one gone.
        long blueGreenFrom = System.currentTimeMillis();
        JobClient green = startStandby(kafka, blue, blueSlot, "green");
        String greenId = green.getJobID().toString();
        // Once every subtask of its index is ready, the standby asks for the handover itself.
        Handover.Row asked = Waiting.until("the standby to ask for the handover", PATIENCE,
            () -> Handover.read(admin, JOB).orElseThrow(), row -> greenId.equals(row.nextWriter()) || row.writer().equals(greenId));
        assertThat(episodes(green)).as("asked once ready").isNotEmpty().allMatch(e -> e.hydratedAt() != 0);
        Handover.Row taken = Waiting.until("the standby to take over", PATIENCE, () -> Handover.read(admin, JOB).orElseThrow(),
            row -> row.writer().equals(greenId));
        long t = taken.writerSince();
        assertThat(asked.nextWriter() == null || asked.handoverAt() == t).as("the new writer's share begins at T").isTrue();
        String blueId = blue.getJobID().toString();
        assertThat(blue.getJobStatus().get()).as("the old instance served to the end").isEqualTo(JobStatus.RUNNING);
        // The ready probe says which instance writes the outputs.
        Waiting.until("the probe to name the new writer", PATIENCE, () -> probe(greenId),
            line -> line.startsWith("ready: ") && line.endsWith("; writes the outputs"));
        Waiting.until("the probe to name the old one retired", PATIENCE, () -> probe(blueId),
            line -> line.endsWith("; retired: another instance writes the outputs"));
        assertThat(episodes(blue)).as("the standby's start fenced none of the old instance's transactions").hasSize(1);
        blue.cancel().get();
        Waiting.until("the old instance to stop", PATIENCE, () -> blue.getJobStatus().get().isGloballyTerminalState());
        awaitDropped(admin, blueSlot);
        long blueGreenTo = System.currentTimeMillis() + 3_000;
        Thread.sleep(3_000);

        // The classic deploy under the same workload: stop with a savepoint, restore.
        long classicFrom = System.currentTimeMillis();
        String stopped = stopWithSavepoint(green);
        standby = false;
        triggersTopic = KafkaOutputs.triggers(kafka.bootstrapServers(), "triggers", "classic", Duration.ofMinutes(5));
        JobClient classic = launch(1, "rocksdb", stopped);
        Waiting.until("the restored job to be ready", PATIENCE, () -> episodes(classic),
            rows -> !rows.isEmpty() && rows.stream().allMatch(e -> e.hydratedAt() != 0));
        Thread.sleep(3_000);
        long classicTo = System.currentTimeMillis();
        assertThat(Handover.read(admin, JOB).orElseThrow().writer()).as("a classic restore takes the outputs over")
            .isEqualTo(classic.getJobID().toString());

        workload.stop();
        moveObjects();
        assertTriggersAsOracle();
        assertPresenceAsOracle();
        threeWayCheck("handover", 2_000);
        assertTriggersAsOracle();
        assertTopicHoldsTheTableOnce(kafka);

        System.out.printf("Handover: %d triggers over %d s; T %d ms after the ask's wall time%n", triggerIds().size(),
            (classicTo - steadyFrom) / 1000, t - blueGreenFrom);
        System.out.printf("Longest stretch without a trigger written, ms (table / topic):%n");
        System.out.printf("  steady state  %6d / %6d%n", arrivals.table.longestGap(steadyFrom, steadyTo),
            arrivals.topic.longestGap(steadyFrom, steadyTo));
        System.out.printf("  blue/green    %6d / %6d%n", arrivals.table.longestGap(blueGreenFrom, blueGreenTo),
            arrivals.topic.longestGap(blueGreenFrom, blueGreenTo));
        System.out.printf("  classic       %6d / %6d%n", arrivals.table.longestGap(classicFrom, classicTo),
            arrivals.topic.longestGap(classicFrom, classicTo));
      }
    }
  }

  /**
   * The {@code deploy} command does the same against the cluster's REST API, as a user runs it:
   * a deploy naming a job that does not write the outputs exits 3 and changes nothing; one whose
   * new job is not ready in time exits 5, cancels that job and drops its slot while the old one
   * serves on; a whole one exits 0 with the new job writing the outputs, the old one cancelled and
   * its slot dropped, and every trigger once in the table and the topic.
   */
  @Test
  void theDeployCommandHandsOverOnTheClusterAndLeavesTheOldJobServingWhenTheNewOneIsNotReady() throws Exception {
    try (KafkaBroker kafka = KafkaBroker.start()) {
      database("deploy", 36);
      JobClient blue = startWriter(kafka, Duration.ofSeconds(2));
      String blueId = blue.getJobID().toString();
      List<String> common = deployOptions(kafka, "2 s");

      try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
        Workload workload = new Workload();
        Command wrongName = deploy(common, "--from-job", blueId, "--new-slot", slot + "_green", "--job-name", "other");
        assertThat(wrongName.status()).as(wrongName.err()).isEqualTo(3);
        assertThat(wrongName.err()).contains("is named 'geofence-it', not 'other'");

        Command notReady = deploy(common, "--from-job", blueId, "--new-slot", slot + "_green", "--job-name", JOB,
            "--ready-timeout", "1 ms");
        assertThat(notReady.status()).as(notReady.out() + notReady.err()).isEqualTo(5);
        assertThat(notReady.err()).contains("was not ready within", "the new job is cancelled, its slot dropped, job " + blueId
            + " serves on");
        assertThat(SlotProbe.read(admin, slot + "_green").exists()).as("the new job's slot dropped").isFalse();
        assertThat(blue.getJobStatus().get()).isEqualTo(JobStatus.RUNNING);
        assertThat(Handover.read(admin, JOB).orElseThrow().writer()).isEqualTo(blueId);

        Command deployed = deploy(common, "--from-job", blueId, "--new-slot", slot + "_green", "--job-name", JOB);
        assertThat(deployed.status()).as(deployed.out() + deployed.err()).isZero();
        assertThat(deployed.out()).contains("- Copying the replication slot " + slot + " into " + slot + "_green",
            "- Handing the outputs over", "Deployed: job ");
        Waiting.until("the old job to stop", PATIENCE, () -> blue.getJobStatus().get().isGloballyTerminalState());
        assertThat(blue.getJobStatus().get()).isEqualTo(JobStatus.CANCELED);
        assertThat(SlotProbe.read(admin, slot).exists()).as("the old job's slot dropped").isFalse();
        cancelOnCluster(endsAsOracle(deployed, slot + "_green", workload, admin, kafka));
      }
    }
  }

  /**
   * Blue/green made of savepoints alone, as the Flink Kubernetes Operator's {@code
   * FlinkBlueGreenDeployment} runs it: both colours are the same {@code run} command (one template),
   * with {@code --savepoint-slots}; the running one is given a savepoint without a stop (canonical,
   * the operator's default), during which it copies its slot for the colour to come; the new one,
   * started from that savepoint alone, reads that copy, starts as the standby, asks, takes over;
   * the old one is then cancelled (the operator deletes it), and the new one drops its slot. A
   * transition aborted first (the new colour never ran) changes nothing, and the old one drops the
   * copy nobody read. Every trigger once in the table and the topic, the presence the oracle's, no
   * slot left behind.
   */
  @Test
  void savepointsAloneMakeABlueGreenDeployAsTheKubernetesOperatorRunsIt() throws Exception {
    try (KafkaBroker kafka = KafkaBroker.start()) {
      database("savepoint_slots", 39);
      kafka.createTopic("triggers", 2);
      // Locations through Kafka, as users feed them: one partition keeps their order.
      kafka.createTopic("locations", 1);
      locationsTopic = new LocationsTopic(kafka.bootstrapServers(), "locations");
      timePolicy = new LocationTimePolicy(Duration.ofSeconds(2), LocationTimePolicy.defaults().maxClockSkew());
      placeFences(0, 30);
      String configured = slot;
      // Slots unread for 5 s are no one's here, so that the case sees them dropped.
      List<String> template = new ArrayList<>(List.of("run", "--savepoint-slots", "--savepoint-slot-retention", "1 s",
          "--savepoint-slot-unread-timeout", "5 s", "--job-name", JOB,
          "-D" + DeploymentOptions.TARGET.key() + "=remote", "-D" + RestOptions.ADDRESS.key() + "=" + URI.create(restUrl()).getHost(),
          "-D" + RestOptions.PORT.key() + "=" + URI.create(restUrl()).getPort()));
      template.addAll(deployOptions(kafka, "2 s").subList(2, deployOptions(kafka, "2 s").size()));
      template.set(template.indexOf("--locations") + 1, "kafka:" + kafka.bootstrapServers() + "/locations");

      Set<String> earlier = jobsOnCluster();
      CompletableFuture<Command> blueRun = commandInBackground(template);
      String blueId = awaitNewJob(earlier);
      try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
        Waiting.until("the first colour to write the outputs", PATIENCE, () -> Handover.read(admin, JOB),
            row -> row.isPresent() && row.get().writer().equals(blueId) && row.get().writesUntil() != Handover.NONE);
        Workload workload = new Workload();
        Thread.sleep(3_000);

        // A transition the operator aborts: the new colour never runs (here: it waits for task slots the
        // cluster does not have) and is suspended after the grace period. The old one serves on and
        // drops the copy nobody reads once its retention is over.
        String unused = savepointWithoutStop(blueId);
        String unusedCopy = SavepointSlots.copyName(configured, SavepointFiles.metadata(unused).getCheckpointId());
        assertThat(SlotProbe.read(admin, unusedCopy).exists()).as("the slot copied during the savepoint").isTrue();
        List<String> stuck = new ArrayList<>(template);
        stuck.set(stuck.indexOf("--parallelism") + 1, "8");
        stuck.add("-Dexecution.savepoint.path=" + unused);
        earlier = jobsOnCluster();
        CompletableFuture<Command> stuckRun = commandInBackground(stuck);
        cancelOnCluster(awaitNewJob(earlier, status -> !status.isGloballyTerminalState()));
        Command stuckEnded = stuckRun.handle((done, failed) -> done).get(2, TimeUnit.MINUTES);
        System.out.println("The aborted colour's run: " + (stuckEnded == null ? "ended in failure" : stuckEnded.err()));
        Waiting.until("the old colour to drop the copy nobody read", PATIENCE, () -> SlotProbe.read(admin, unusedCopy).exists(),
            exists -> !exists);
        assertThat(Handover.read(admin, JOB).orElseThrow().writer()).isEqualTo(blueId);

        // The operator's transition: a savepoint of the running colour without a stop ...
        String savepoint = savepointWithoutStop(blueId);
        String copy = SavepointSlots.copyName(configured, SavepointFiles.metadata(savepoint).getCheckpointId());
        assertThat(SlotProbe.read(admin, copy).exists()).as("the slot copied during the savepoint").isTrue();
        // ... and the new colour from the same template, given that savepoint.
        List<String> green = new ArrayList<>(template);
        green.add("-Dexecution.savepoint.path=" + savepoint);
        earlier = jobsOnCluster();
        CompletableFuture<Command> greenRun = commandInBackground(green);
        String greenId = awaitNewJob(earlier);
        Handover.Row registered = Waiting.until("the new colour to register as the standby", PATIENCE,
            () -> Handover.read(admin, JOB).orElseThrow(), row -> !row.writer().equals(blueId) || greenId.equals(row.standby())
                || greenId.equals(row.nextWriter()));
        assertThat(registered.writer()).as("the new colour does not take the outputs at once").isEqualTo(blueId);
        Waiting.until("the new colour to take over", PATIENCE, () -> Handover.read(admin, JOB).orElseThrow(),
            row -> row.writer().equals(greenId));
        assertThat(ReplicationSlots.isRead(admin, copy).orElse(false)).as("the new colour reads the copy").isTrue();

        // The operator deletes the old colour once the new one runs and the deletion delay is over.
        assertThat(SlotProbe.read(admin, configured).exists()).as("the old colour's slot kept while it runs").isTrue();
        cancelOnCluster(blueId);
        // Its attached run ends with the job (in failure: the job was cancelled).
        blueRun.handle((done, failed) -> null).get(2, TimeUnit.MINUTES);
        Waiting.until("the new colour to drop the old one's slot", PATIENCE, () -> SlotProbe.read(admin, configured).exists(),
            exists -> !exists);
        Thread.sleep(3_000);
        workload.stop();
        slot = copy;
        moveObjects();
        assertTriggersAsOracle();
        assertPresenceAsOracle();
        assertTopicHoldsTheTableOnce(kafka);
        try (Statement s = admin.createStatement();
            ResultSet r = s.executeQuery("SELECT string_agg(slot_name, ',') FROM pg_replication_slots WHERE slot_name LIKE '"
                + configured + "%'")) {
          r.next();
          assertThat(r.getString(1)).as("no slot left behind").isEqualTo(copy);
        }
        cancelOnCluster(greenId);
        greenRun.handle((done, failed) -> null).get(2, TimeUnit.MINUTES);
      }
    }
  }

  /** A savepoint of {@code job} without a stop, canonical, as the Kubernetes operator takes it by default. */
  private String savepointWithoutStop(String job) throws Exception {
    try (RestClusterClient<StandaloneClusterId> client = clusterClient()) {
      return client.triggerSavepoint(JobID.fromHexString(job), temp.resolve("savepoints").toUri().toString(),
          SavepointFormatType.CANONICAL).get();
    }
  }

  /**
   * The ids of every job on the cluster, whatever its state: a job submitted next is none of them.
   * (The cluster is the class's: a job of an earlier case may still be cancelling.)
   */
  private static Set<String> jobsOnCluster() throws Exception {
    try (RestClusterClient<StandaloneClusterId> client = clusterClient()) {
      return client.listJobs().get().stream().map(j -> j.getJobId().toString()).collect(Collectors.toSet());
    }
  }

  /** The id of the job named {@link #JOB} that runs on the cluster and is none of {@code known}. */
  private static String awaitNewJob(Set<String> known) throws Exception {
    return awaitNewJob(known, status -> status == JobStatus.RUNNING);
  }

  /** The id of the job named {@link #JOB} on the cluster, none of {@code known}, once its status is {@code state}. */
  private static String awaitNewJob(Set<String> known, Predicate<JobStatus> state) throws Exception {
    try (RestClusterClient<StandaloneClusterId> client = clusterClient()) {
      return Waiting.until("the job to be on the cluster", PATIENCE, () -> client.listJobs().get().stream()
          .filter(j -> j.getJobName().equals(JOB) && state.test(j.getJobState()) && !known.contains(j.getJobId().toString()))
          .map(j -> j.getJobId().toString()).findFirst().orElse(""), id -> !id.isEmpty());
    }
  }

  private static RestClusterClient<StandaloneClusterId> clusterClient() throws Exception {
    return new RestClusterClient<>(FLINK.getClientConfiguration(), StandaloneClusterId.getInstance());
  }

  /** {@link #command} on another thread, as a user's attached {@code flink run} waits for its job. */
  private static CompletableFuture<Command> commandInBackground(List<String> args) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return command(args.toArray(String[]::new));
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
  }

  /**
   * The old job fails for good after the new one asked for the handover and before it committed
   * its share (its restarts ran out: here it has none, and its replication connection is cut): the
   * deploy command submits its last checkpoint in its seat, on its slot, and the handover goes on
   * with that job. Flink's recovery commits what the checkpoint had pending and aborts the ended
   * job's later transactions; the resumed job writes the rest of the share before T, the new one
   * those from T on: every trigger once in the table and the topic, the presence the oracle's. A
   * writer cancelled by hand during the next deploy has no checkpoint left: that deploy exits 8.
   */
  @Test
  void theOldJobFailingForGoodDuringTheHandoverIsResumedFromItsLastCheckpoint() throws Exception {
    try (KafkaBroker kafka = KafkaBroker.start()) {
      database("resume", 38);
      failForGood = true;
      // Long enough that the old job's share before T is still open when it fails.
      JobClient blue = startWriter(kafka, Duration.ofSeconds(20));
      String blueId = blue.getJobID().toString();
      String blueSlot = slot;
      List<String> common = deployOptions(kafka, "20 s");
      try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
        Workload workload = new Workload();
        CompletableFuture<Command> deploying = deployInBackground(common, "--from-job", blueId, "--new-slot", blueSlot + "_green",
            "--job-name", JOB);
        Handover.Row asked = Waiting.until("the new job to ask for the handover", PATIENCE, () -> Handover.read(admin, JOB).orElseThrow(),
            row -> row.nextWriter() != null);
        assertThat(asked.writer()).isEqualTo(blueId);
        assertThat(asked.subtasksDone()).as("the old job's share before T still open").isZero();
        try (Statement s = admin.createStatement()) {
          s.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '" + blueSlot + "'");
        }
        Waiting.until("the old job to fail for good", PATIENCE, () -> blue.getJobStatus().get(), status -> status == JobStatus.FAILED);

        Command deployed = deploying.get(5, TimeUnit.MINUTES);
        assertThat(deployed.status()).as(deployed.out() + deployed.err()).isZero();
        assertThat(deployed.out()).contains("- Job " + blueId + " is FAILED before it handed over: resuming it from its last checkpoint, on "
            + blueSlot, "Deployed: job ");
        assertThat(SlotProbe.read(admin, blueSlot).exists()).as("the old job's slot dropped after its resumed job").isFalse();
        String greenId = endsAsOracle(deployed, blueSlot + "_green", workload, admin, kafka);

        // Cancelled by hand in the middle of the next deploy, a writer leaves no checkpoint to
        // resume (Flink deletes a cancelled job's): deploy says so and exits 8, the new job left running.
        List<String> next = deployOptions(kafka, "20 s");
        CompletableFuture<Command> lost = deployInBackground(next, "--from-job", greenId, "--new-slot", blueSlot + "_purple",
            "--job-name", JOB);
        Handover.Row registered = Waiting.until("the next new job to register", PATIENCE, () -> Handover.read(admin, JOB).orElseThrow(),
            row -> row.standby() != null || row.nextWriter() != null);
        cancelOnCluster(greenId);
        Command ended = lost.get(5, TimeUnit.MINUTES);
        System.out.println(ended.out() + ended.err());
        assertThat(ended.status()).as(ended.out() + ended.err()).isEqualTo(8);
        assertThat(ended.err()).startsWith("geofence: job " + greenId + " is CANCELED before it handed over");
        cancelOnCluster(registered.standby() != null ? registered.standby() : registered.nextWriter());
        awaitDropped(admin, blueSlot + "_purple");
        awaitDropped(admin, blueSlot + "_green");
      }
    }
  }

  /**
   * After a deploy that exited 0: the new job on {@code newSlot} writes the outputs; with the
   * workload stopped and the objects moved once more, the table, the presence and the topic are the
   * oracle's. Returns the new job's id: it is the cluster's, not the fixture's, so the case cancels it.
   */
  private String endsAsOracle(Command deployed, String newSlot, Workload workload, Connection admin, KafkaBroker kafka)
      throws Exception {
    String greenId = Handover.read(admin, JOB).orElseThrow().writer();
    assertThat(deployed.out()).contains("Deployed: job " + greenId + " on slot " + newSlot);
    Thread.sleep(3_000);
    workload.stop();
    slot = newSlot;
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertTopicHoldsTheTableOnce(kafka);
    System.out.println(deployed.out());
    return greenId;
  }

  /** The options of {@code deploy} for this fixture's cluster, database and inbox. */
  private List<String> deployOptions(KafkaBroker kafka, String allowedLateness) {
    return List.of("--rest-url", restUrl(), "--slot", slot, "--source-url", url, "--source-user", "postgres",
        "--locations", "file:" + inbox, "--parallelism", "1", "--checkpoint-interval", "1 s",
        "--heartbeat-interval", "300 ms", "--allowed-lateness", allowedLateness, "--state-backend", "rocksdb",
        "--checkpoint-dir", temp.resolve("checkpoints").toUri().toString(),
        "--savepoint-dir", temp.resolve("savepoints").toUri().toString(),
        "--triggers-topic", kafka.bootstrapServers() + "/triggers");
  }

  private static String restUrl() {
    Configuration client = FLINK.getClientConfiguration();
    return "http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT);
  }

  /** Cancels a job the deploy command submitted: the cluster's, not the fixture's, so cancelled before the next case. */
  private static void cancelOnCluster(String job) throws Exception {
    HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(restUrl() + "/jobs/" + job + "?mode=cancel"))
        .method("PATCH", HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
  }

  /**
   * The database (fences and outputs, the handover row among them) restarts in the middle of a
   * handover, after the ask and before the takeover, a real restart of the server on its data
   * directory: both instances fail over and restore from their checkpoints, the handover goes on
   * from the row where it was, and every trigger is still written once, in the table and the topic.
   */
  @Test
  void theDatabaseRestartingDuringTheHandoverLosesAndDoublesNoTrigger() throws Exception {
    EmbeddedPostgres.Builder server = restartableServer("server");
    EmbeddedPostgres running = server.start();
    try (KafkaBroker kafka = KafkaBroker.start()) {
      database("jdbc:postgresql://localhost:" + running.getPort() + "/postgres", "", "handover_restart", false, 37);
      // Long enough that the restart falls between the ask and the takeover.
      JobClient blue = startWriter(kafka, Duration.ofSeconds(20));
      moveObjects();
      assertTriggersAsOracle();
      String blueSlot = slot;
      JobClient green = startStandby(kafka, blue, blueSlot, "green");
      String greenId = green.getJobID().toString();
      Waiting.until("the standby to ask for the handover", PATIENCE, () -> {
        try (Connection c = DriverManager.getConnection(url, "postgres", "")) {
          return Handover.read(c, JOB).orElseThrow();
        }
      }, row -> greenId.equals(row.nextWriter()));
      moveObjects();
      awaitClockPastLocations();

      db.close();
      running.close();
      Waiting.until("both instances to fail over on the stopped database", PATIENCE,
          () -> WarmStartITCase.failuresMentioning(blue, "Exception") >= 1 && WarmStartITCase.failuresMentioning(green, "Exception") >= 1);
      running = server.start();
      db = DriverManager.getConnection(url, "postgres", "");
      moveObjects();
      try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
        Waiting.until("the standby to take over after the restart", PATIENCE, () -> Handover.read(admin, JOB).orElseThrow(),
            row -> row.writer().equals(greenId));
        blue.cancel().get();
        Waiting.until("the old instance to stop", PATIENCE, () -> blue.getJobStatus().get().isGloballyTerminalState());
        awaitDropped(admin, blueSlot);
      }
      moveObjects();
      assertTriggersAsOracle();
      assertPresenceAsOracle();
      assertTopicHoldsTheTableOnce(kafka);
    } finally {
      cancelJobsAndDisconnect();
      running.close();
    }
  }

  /**
   * The first instance: with a handover row, the triggers topic (transactional prefix "blue"), 30
   * fences, at parallelism 1 (the cluster's four slots hold a second instance beside it).
   */
  private JobClient startWriter(KafkaBroker kafka, Duration allowedLateness) throws Exception {
    kafka.createTopic("triggers", 2);
    timePolicy = new LocationTimePolicy(allowedLateness, LocationTimePolicy.defaults().maxClockSkew());
    handover = true;
    triggersTopic = KafkaOutputs.triggers(kafka.bootstrapServers(), "triggers", "blue", Duration.ofMinutes(5));
    placeFences(0, 30);
    return start(1, "rocksdb");
  }

  /** The topic, read as read_committed readers do, holds every trigger of the table, each once. */
  private void assertTopicHoldsTheTableOnce(KafkaBroker kafka) throws Exception {
    Set<String> table = triggerIds();
    Map<String, Integer> topic = Waiting.until("the topic to hold every trigger of the table", PATIENCE,
        () -> triggerIdsIn(kafka.values("triggers", true)), ids -> ids.keySet().equals(table));
    assertThat(topic.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey).toList())
        .as("triggers in the topic more than once").isEmpty();
  }

  /**
   * A deploy's first half by hand: the running instance's slot copied (as SLOT_NAME), a savepoint
   * taken without a stop, and a standby started from it on the copy, with a transactional prefix
   * of its own (NAME).
   */
  private JobClient startStandby(KafkaBroker kafka, JobClient running, String runningSlot, String name) throws Exception {
    try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
      ReplicationSlots.copy(admin, runningSlot, runningSlot + "_" + name);
    }
    String savepoint = running.triggerSavepoint(temp.resolve("savepoints").toUri().toString()).get();
    slot = runningSlot + "_" + name;
    standby = true;
    triggersTopic = KafkaOutputs.forStandby(
        KafkaOutputs.triggers(kafka.bootstrapServers(), "triggers", name, Duration.ofMinutes(5)));
    return launch(1, "rocksdb", savepoint);
  }

  private record Command(int status, String out, String err) {}

  /** The ready probe's line for {@code job}, as {@code java -jar geofence-job.jar ready} prints it. */
  private static String probe(String job) throws Exception {
    Command ready = command("ready", "--rest-url", restUrl(), "--job", job);
    return ready.out().strip();
  }

  private static Command deploy(List<String> common, String... options) throws Exception {
    List<String> args = new ArrayList<>(List.of("deploy"));
    args.addAll(common);
    args.addAll(List.of(options));
    return command(args.toArray(String[]::new));
  }

  /** {@link #deploy} on another thread, so that the case can act while it runs. */
  private static CompletableFuture<Command> deployInBackground(List<String> common, String... options) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return deploy(common, options);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
  }

  private static Command command(String... args) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = GeofenceCommand.run(args, new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Command(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private static void awaitDropped(Connection admin, String slot) throws Exception {
    Waiting.until("the slot " + slot + " to be let go of and dropped", PATIENCE, () -> {
      try {
        return ReplicationSlots.dropIfUnused(admin, slot);
      } catch (IllegalStateException stillRead) {
        return false;
      }
    });
  }

  /** Objects move and fences are edited until stopped, as the oracle expects them. */
  private final class Workload {

    private final AtomicBoolean stopping = new AtomicBoolean();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final Thread thread = new Thread(this::run, "workload");

    Workload() {
      thread.start();
    }

    private void run() {
      try {
        for (int round = 0; !stopping.get(); round++) {
          moveObjects();
          // An edit commits after every location so far, so that the job applies it as the oracle does.
          awaitClockPastLocations();
          int fence = random.nextInt(30);
          if (round % 10 == 9) {
            deleteFences(fence, fence + 1);
            createFences(fence, fence + 1);
          } else {
            placeFences(fence, fence + 1);
          }
          Thread.sleep(100);
        }
      } catch (Throwable e) {
        failure.set(e);
      }
    }

    void stop() throws Exception {
      stopping.set(true);
      thread.join();
      if (failure.get() != null) {
        throw new AssertionError("the workload failed", failure.get());
      }
    }
  }

  /** When triggers were seen written: rows of the table, and committed records of the topic. */
  private static final class Arrivals implements AutoCloseable {

    final Seen table = new Seen();
    final Seen topic = new Seen();
    private final AtomicBoolean closing = new AtomicBoolean();
    private final List<Thread> threads = new ArrayList<>();

    Arrivals(String url, String bootstrapServers) {
      watch(() -> {
        try (Connection db = DriverManager.getConnection(url, "postgres", ""); Statement s = db.createStatement()) {
          long count = 0;
          while (!closing.get()) {
            try (ResultSet r = s.executeQuery("SELECT count(*) FROM geofence_triggers")) {
              r.next();
              if (r.getLong(1) > count) {
                count = r.getLong(1);
                table.add(System.currentTimeMillis());
              }
            }
            Thread.sleep(20);
          }
        }
      });
      watch(() -> {
        Properties config = new Properties();
        config.setProperty(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        config.setProperty(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
          List<TopicPartition> partitions = List.of(new TopicPartition("triggers", 0), new TopicPartition("triggers", 1));
          consumer.assign(partitions);
          consumer.seekToBeginning(partitions);
          while (!closing.get()) {
            if (!consumer.poll(Duration.ofMillis(20)).isEmpty()) {
              topic.add(System.currentTimeMillis());
            }
          }
        }
      });
    }

    private interface Watch {
      void run() throws Exception;
    }

    private void watch(Watch watch) {
      Thread thread = new Thread(() -> {
        try {
          watch.run();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }, "arrivals");
      thread.setDaemon(true);
      thread.start();
      threads.add(thread);
    }

    @Override
    public void close() throws InterruptedException {
      closing.set(true);
      for (Thread thread : threads) {
        thread.join(5_000);
      }
    }
  }

  private static final class Seen {

    private final ConcurrentLinkedQueue<Long> times = new ConcurrentLinkedQueue<>();

    void add(long time) {
      times.add(time);
    }

    /** The longest time between two arrivals, of those stretches that overlap [from, to]. */
    long longestGap(long from, long to) {
      long longest = 0;
      Long previous = null;
      for (long time : times) {
        if (previous != null && time > from && previous < to) {
          longest = Math.max(longest, time - previous);
        }
        previous = time;
      }
      return longest;
    }
  }
}
