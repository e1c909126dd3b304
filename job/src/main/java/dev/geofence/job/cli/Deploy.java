package dev.geofence.job.cli;

import static org.apache.flink.configuration.ConfigOptions.key;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.geofence.connectors.config.CommandLine;
import dev.geofence.connectors.config.Flag;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.sink.Handover;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.job.operator.SavepointFiles;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;

/**
 * The {@code deploy} command: a blue/green deploy on a session cluster (docs/deployment.md). Starts
 * the next instance of the job beside the running one and hands the outputs over without a pause:
 * copies the running job's replication slot, takes a savepoint without stopping it, submits the
 * new job from that savepoint as a standby on the copy, waits until its index is ready, asks for
 * the handover, waits until the new job writes the outputs, then cancels the old job and drops its
 * slot. Each step prints a line; each failure prints one sentence and exits with its own status,
 * leaving the old job serving wherever that is still possible. Should the old job end before it
 * has handed over (it failed for good, or was cancelled), its last checkpoint is submitted in its
 * seat ({@link GeofenceOptions#RESUME_WRITER}), and the handover goes on with that job.
 */
final class Deploy {

  /** Exit statuses, one per way a deploy can end. */
  static final int DEPLOYED = 0;
  static final int USAGE = 2;
  static final int OLD_JOB = 3;
  static final int NOT_STARTED = 4;
  static final int NOT_READY = 5;
  static final int NOT_HANDED_OVER = 6;
  static final int NOT_CLEANED_UP = 7;
  static final int WRITER_LOST = 8;

  static final ConfigOption<String> REST_URL = key("geofence.deploy.rest-url").stringType().noDefaultValue()
      .withDescription("The session cluster's REST API, e.g. http://flink:8081: where the running job is and the new one goes.");
  static final ConfigOption<String> FROM_JOB = key("geofence.deploy.from-job").stringType().noDefaultValue()
      .withDescription("The id of the running job, started with --handover, that the new one takes over from.");
  static final ConfigOption<String> NEW_SLOT = key("geofence.deploy.new-slot").stringType().noDefaultValue()
      .withDescription("The new job's replication slot, copied from the running job's (--slot); the next deploy gives it as --slot.");
  static final ConfigOption<Duration> READY_TIMEOUT = key("geofence.deploy.ready-timeout").durationType()
      .defaultValue(Duration.ofMinutes(15))
      .withDescription("How long the new job may take to be ready before it is cancelled and the old one serves on.");
  static final ConfigOption<Duration> HANDOVER_TIMEOUT = key("geofence.deploy.handover-timeout").durationType()
      .noDefaultValue()
      .withDescription("How long the old job may take to commit every trigger before T.");
  static final ConfigOption<Integer> NEW_REST_PORT = key("geofence.deploy.new-rest-port").intType().noDefaultValue()
      .withDescription("For a running job started with java -jar (its embedded cluster's REST API at --rest-url): start the"
          + " new job with java -jar too, in a process of its own whose embedded cluster's REST API listens on this port.");

  static final CommandLine OPTIONS = new CommandLine(List.of(
      Flag.text("rest-url", "URL", REST_URL).asRequired(),
      Flag.text("from-job", "ID", FROM_JOB).asRequired(),
      Flag.text("new-slot", "NAME", NEW_SLOT).asRequired(),
      Flag.duration("ready-timeout", READY_TIMEOUT),
      Flag.duration("handover-timeout", HANDOVER_TIMEOUT).defaultingTo("the allowed lateness and 5 min"),
      Flag.number("new-rest-port", "P", NEW_REST_PORT).defaultingTo("none: the new job goes to the session cluster")));

  /** The deploy's own flags and every flag of {@code run}, which the new job is started with. */
  private static final CommandLine ALL = new CommandLine(concat(OPTIONS.flags(), GeofenceCommand.RUN.flags()));

  static final String HELP = String.join("\n",
      "Usage: java -jar geofence-job.jar deploy --rest-url URL --from-job ID --new-slot NAME [--new-rest-port P] [options of run]",
      "",
      "A blue/green deploy on a session cluster (or, with --new-rest-port, of a job run with java -jar, the new",
      "one started with java -jar in a process of its own): starts this jar's job beside the running one (which must",
      "run with --handover) from a savepoint taken without stopping it, on a copy of its replication slot,",
      "waits until the new job's index is ready, hands the outputs over without a pause, then cancels the",
      "old job and drops its slot. Give the options of run the new job is to run with, --slot being the",
      "running job's slot. Exit 0 deployed; 2 bad command line; 3 the running job cannot hand over; 4 the",
      "new job did not start (the old one serves on); 5 it was not ready in time (cancelled, the old one",
      "serves on); 6 the handover did not finish in time (both run); 7 the old job or its slot is left; 8 the",
      "old job ended before handing over and could not be resumed from its last checkpoint.",
      "",
      "Options of deploy:",
      OPTIONS.help());

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Set<String> TERMINAL = Set.of("CANCELED", "FAILED", "FINISHED");

  private final PrintStream out;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private String restUrl;
  /** Where the new job's REST API is: the session cluster's, or its own process's embedded cluster's. */
  private String newRestUrl;
  /** The new job's process, when it runs under java -jar; null on a session cluster. */
  private NewProcess newProcess;
  /** The job in the writer's seat: the running job, or the one resuming it after it ended. */
  private String writerJob;
  /** What resuming the writer needs: the new job's options, the writer's slot, the password. */
  private Configuration given;
  private String oldSlot;
  private String password;

  private Deploy(PrintStream out) {
    this.out = out;
  }

  /** Runs the command, {@code args[0]} being "deploy"; a bad command line throws IllegalArgumentException. */
  static int run(String[] args, PrintStream out, PrintStream err) throws Exception {
    if (args.length > 1 && args[1].equals("--help")) {
      out.println(HELP);
      return DEPLOYED;
    }
    Configuration given = ALL.parse(args, 1);
    try {
      String password = System.getenv(GeofenceOptions.PASSWORD_ENV);
      return new Deploy(out).deploy(given, password == null ? "" : password);
    } catch (Failed e) {
      err.println("geofence: " + e.getMessage());
      return e.status;
    }
  }

  private int deploy(Configuration commandLine, String password) throws Exception {
    this.password = password;
    refuseSavepointSlots(commandLine);
    restUrl = ALL.required(commandLine, REST_URL).replaceAll("/+$", "");
    URI rest = URI.create(restUrl);
    if (rest.getHost() == null || !restUrl.matches("https?://.*")) {
      throw new IllegalArgumentException("option --rest-url must look like http://host:8081, got '" + restUrl + "'");
    }
    Integer newRestPort = ALL.get(commandLine, NEW_REST_PORT);
    if (newRestPort == null) {
      // The cluster's configuration beneath the command line, as flink run reads the cluster's
      // config.yaml: the job's options kept there, and the changelog storage the new job must know.
      given = clusterConfiguration();
      given.addAll(commandLine);
      newRestUrl = restUrl;
    } else {
      // An embedded cluster's configuration is that process's own (its ports among it): the new
      // process takes the command line alone, as the running one did.
      given = new Configuration(commandLine);
      String bind = ALL.get(given, GeofenceOptions.BIND_ADDRESS);
      newRestUrl = "http://" + (bind.equals("0.0.0.0") ? "127.0.0.1" : bind) + ":" + newRestPort;
    }
    refuseSavepointSlots(given);
    String oldJob = ALL.required(given, FROM_JOB);
    writerJob = oldJob;
    oldSlot = ALL.get(given, GeofenceOptions.SLOT);
    String newSlot = ALL.required(given, NEW_SLOT);
    if (newSlot.equals(oldSlot)) {
      throw new IllegalArgumentException("option --new-slot must differ from the running job's --slot (" + oldSlot + ")");
    }
    String jobName = ALL.get(given, GeofenceOptions.JOB_NAME);
    Duration lateness = ALL.get(given, GeofenceOptions.ALLOWED_LATENESS);
    Duration handoverTimeout = given.getOptional(HANDOVER_TIMEOUT).orElse(lateness.plus(Duration.ofMinutes(5)));
    String sourceUrl = ALL.required(given, GeofenceOptions.SOURCE_URL);
    String user = ALL.required(given, GeofenceOptions.SOURCE_USER);
    String sinkUrl = ALL.get(given, GeofenceOptions.SINK_URL);
    sinkUrl = sinkUrl == null ? sourceUrl : sinkUrl;

    step("Checking the running job " + oldJob + " at " + restUrl);
    JsonNode job = get(restUrl, "/jobs/" + oldJob, OLD_JOB);
    if (!job.path("state").asText().equals("RUNNING")) {
      throw new Failed(OLD_JOB, "job " + oldJob + " is " + job.path("state").asText() + ", not RUNNING");
    }
    if (!job.path("name").asText().equals(jobName)) {
      throw new Failed(OLD_JOB, "job " + oldJob + " is named '" + job.path("name").asText() + "', not '" + jobName
          + "' (give --job-name as the running job has it)");
    }
    try (Connection sink = DriverManager.getConnection(sinkUrl, user, password)) {
      String writer = Handover.read(sink, jobName).map(Handover.Row::writer).orElse(null);
      if (!oldJob.equals(writer)) {
        throw new Failed(OLD_JOB, writer == null
            ? "no job named " + jobName + " keeps a row in geofence_handover: start the running job with --handover first"
            : "the outputs of " + jobName + " are written by job " + writer + ", not " + oldJob);
      }
    }

    step("Copying the replication slot " + oldSlot + " into " + newSlot);
    try (Connection source = DriverManager.getConnection(sourceUrl, user, password)) {
      ReplicationSlots.copy(source, oldSlot, newSlot);
    } catch (IllegalStateException | SQLException e) {
      throw new Failed(NOT_STARTED, e.getMessage());
    }

    String newJob;
    try {
      step("Taking a savepoint of " + oldJob + " without stopping it");
      String savepoint = savepoint(oldJob, ALL.get(given, GeofenceOptions.SAVEPOINT_DIR));
      out.println("      " + savepoint);
      if (newRestPort == null) {
        step("Submitting the new job from it, as a standby on " + newSlot);
        newJob = submit(newSlot, savepoint, null);
      } else {
        step("Starting the new job from it with java -jar, as a standby on " + newSlot + ", its REST API at " + newRestUrl);
        newProcess = NewProcess.start(options(newSlot, savepoint, null, newRestPort), Path.of(newSlot + ".log"));
        out.println("      process " + newProcess.pid() + ", its output in " + newProcess.log().toAbsolutePath());
        newJob = newProcess.awaitJob(newRestUrl, http, Duration.ofMinutes(2));
      }
      out.println("      job " + newJob);
    } catch (Failed | RuntimeException e) {
      dropSlot(sourceUrl, user, password, newSlot);
      throw e instanceof Failed f ? f : new Failed(NOT_STARTED, "the new job did not start: " + e.getMessage());
    }

    step("Waiting until the new job's index is ready (at most " + ReadinessProbe.seconds(
        ALL.get(given, READY_TIMEOUT).toMillis()) + "): it then asks for the handover itself");
    try (Connection sink = DriverManager.getConnection(sinkUrl, user, password)) {
      Handover.Row asked;
      try {
        asked = awaitAsked(sink, jobName, newJob, ALL.get(given, READY_TIMEOUT));
      } catch (Failed e) {
        if (e.status == WRITER_LOST) {
          // No writer serves on: the new job, left running, is what the outputs still have.
          throw e;
        }
        // Once asked, the new job is the one to write from T on: cancelling it then would leave
        // the triggers from T on to nobody. Withdrawn first, it can no longer ask; one that asked
        // meanwhile is a success.
        if (Handover.withdrawStandby(sink, jobName, newJob)) {
          cancel(newRestUrl, newJob);
          dropSlot(sourceUrl, user, password, newSlot);
          throw new Failed(NOT_READY, e.getMessage() + "; the new job is cancelled, its slot dropped, job " + writerJob + " serves on");
        }
        asked = Handover.read(sink, jobName).orElseThrow();
      }

      step("Handing the outputs over");
      out.println("      T = " + Instant.ofEpochMilli(asked.nextWriter() != null ? asked.handoverAt() : asked.writerSince()) + ": "
          + writerJob + " writes the triggers before it, " + newJob + " those from it on; waiting for " + writerJob
          + " to commit its share (its clock past T by the allowed lateness, " + ReadinessProbe.seconds(lateness.toMillis()) + ")");
      long deadline = System.nanoTime() + handoverTimeout.toNanos();
      while (!Handover.read(sink, jobName).map(r -> r.writer().equals(newJob)).orElse(false)) {
        if (resumeEndedWriter()) {
          // The resumed job restores and catches up before it can commit its share: a new wait.
          deadline = System.nanoTime() + handoverTimeout.toNanos();
        }
        if (System.nanoTime() > deadline) {
          throw new Failed(NOT_HANDED_OVER, "job " + writerJob + " did not commit its triggers before T within "
              + ReadinessProbe.seconds(handoverTimeout.toMillis()) + "; both jobs run, " + newJob
              + " writes those from T on: see geofence_handover and the old job's log");
        }
        Thread.sleep(500);
      }
    }
    out.println("      job " + newJob + " writes the outputs");

    step("Cancelling " + writerJob + " and dropping its slot " + oldSlot);
    try {
      cancel(restUrl, writerJob);
    } catch (Failed e) {
      throw new Failed(NOT_CLEANED_UP, e.getMessage() + "; cancel job " + writerJob + " and drop the slot " + oldSlot + " by hand");
    }
    if (!dropSlot(sourceUrl, user, password, oldSlot)) {
      throw new Failed(NOT_CLEANED_UP, "the slot " + oldSlot + " was not let go of within a minute; drop it by hand"
          + " (SELECT pg_drop_replication_slot('" + oldSlot + "')) once no job reads it: it keeps WAL until then");
    }
    out.println("Deployed: job " + newJob + " on slot " + newSlot + " (give --slot " + newSlot + " to the next deploy)");
    return DEPLOYED;
  }

  /** The JobManager's configuration, as Flink's REST API gives it; values it masks are left out, lest they replace the real ones. */
  private Configuration clusterConfiguration() throws Failed, InterruptedException {
    Configuration cluster = new Configuration();
    for (JsonNode entry : get(restUrl, "/jobmanager/config", OLD_JOB)) {
      String key = entry.path("key").asText();
      String value = entry.path("value").asText();
      if (!key.startsWith("$internal") && !value.equals("******")) {
        cluster.setString(key, value);
      }
    }
    return cluster;
  }

  private void step(String what) {
    out.println("- " + what);
  }

  private String savepoint(String job, String directory) throws Failed, InterruptedException {
    ObjectNode body = JSON.createObjectNode().put("cancel-job", false);
    if (directory != null) {
      body.put("target-directory", directory);
    }
    String request = send(restUrl, "POST", "/jobs/" + job + "/savepoints", body.toString(), NOT_STARTED).path("request-id").asText();
    long deadline = System.nanoTime() + Duration.ofMinutes(30).toNanos();
    while (System.nanoTime() < deadline) {
      JsonNode status = get(restUrl, "/jobs/" + job + "/savepoints/" + request, NOT_STARTED);
      if (status.path("status").path("id").asText().equals("COMPLETED")) {
        JsonNode operation = status.path("operation");
        if (operation.has("failure-cause")) {
          throw new Failed(NOT_STARTED, "the savepoint of " + job + " failed: "
              + operation.path("failure-cause").path("stack-trace").asText().lines().findFirst().orElse("no cause given"));
        }
        return operation.path("location").asText();
      }
      Thread.sleep(500);
    }
    throw new Failed(NOT_STARTED, "the savepoint of " + job + " did not complete within 30 min");
  }

  /**
   * Once the job in the writer's seat has ended (failed for good, or cancelled by someone else),
   * submits its last checkpoint in its seat, on its slot: Flink's own recovery then commits what
   * that checkpoint had pending and aborts the ended job's later transactions, and the resumed job
   * writes what the ended one had not committed. True if it did so.
   */
  private boolean resumeEndedWriter() throws Exception {
    if (newProcess != null) {
      return resumeEndedProcess();
    }
    String state = get(restUrl, "/jobs/" + writerJob, WRITER_LOST).path("state").asText();
    if (!TERMINAL.contains(state)) {
      return false;
    }
    JsonNode last = get(restUrl, "/jobs/" + writerJob + "/checkpoints", WRITER_LOST).path("latest").path("completed");
    String checkpoint = last.path("external_path").asText("");
    if (checkpoint.isEmpty() || last.path("discarded").asBoolean(false)) {
      throw new Failed(WRITER_LOST, "job " + writerJob + " is " + state + " before it handed over and left no checkpoint to resume"
          + " it from (Flink deletes them when a job is cancelled): the triggers it had not committed are missing, and the"
          + " new job runs on; see docs/operations.md, a handover that does not finish");
    }
    step("Job " + writerJob + " is " + state + " before it handed over: resuming it from its last checkpoint, on " + oldSlot);
    out.println("      " + checkpoint);
    String ended = writerJob;
    try {
      writerJob = submit(oldSlot, checkpoint, ended);
    } catch (RuntimeException e) {
      throw new Failed(WRITER_LOST, "job " + ended + " is " + state + " before it handed over, and resuming it failed: " + e.getMessage());
    }
    out.println("      job " + writerJob + " in the seat of " + ended);
    return true;
  }

  /** Both would copy the slot: the new job would read the copy made at its savepoint, not --new-slot. */
  private static void refuseSavepointSlots(Configuration options) {
    if (ALL.get(options, GeofenceOptions.SAVEPOINT_SLOTS)) {
      throw new IllegalArgumentException("option " + ALL.describe(GeofenceOptions.SAVEPOINT_SLOTS.key()) + " is for deploys made"
          + " of savepoints alone (the Kubernetes operator's blue/green); deploy copies the slot itself: leave it out");
    }
  }

  /**
   * Under java -jar: once the writer's process is gone (its job ended, or the process was killed),
   * starts its newest checkpoint under {@code --checkpoint-dir} in its seat, in a process of its
   * own on its REST port. True if it did so; false while the process is still going.
   */
  private boolean resumeEndedProcess() throws Exception {
    try {
      // Answering, the process goes on; a job that ended takes its process, REST API and port with it next.
      get(restUrl, "/jobs/" + writerJob, WRITER_LOST);
      return false;
    } catch (Failed e) {
      if (!e.unreachable) {
        throw e;
      }
    }
    String directory = ALL.get(given, GeofenceOptions.CHECKPOINT_DIR);
    String checkpoint = directory == null ? null : SavepointFiles.latestCheckpoint(directory, writerJob);
    if (checkpoint == null) {
      throw new Failed(WRITER_LOST, "job " + writerJob + " ended with its process before it handed over and left no checkpoint"
          + (directory == null ? " (no --checkpoint-dir given)" : " under " + directory) + " to resume it from: the triggers it had"
          + " not committed are missing, and the new job runs on; see docs/operations.md, a handover that does not finish");
    }
    step("Job " + writerJob + " ended with its process before it handed over: resuming it from its last checkpoint, on " + oldSlot
        + ", in a process of its own");
    out.println("      " + checkpoint);
    String ended = writerJob;
    try {
      NewProcess resumed = NewProcess.start(options(oldSlot, checkpoint, ended, URI.create(restUrl).getPort()),
          Path.of(oldSlot + ".log"));
      out.println("      process " + resumed.pid() + ", its output in " + resumed.log().toAbsolutePath());
      writerJob = resumed.awaitJob(restUrl, http, Duration.ofMinutes(2));
    } catch (IOException | RuntimeException e) {
      throw new Failed(WRITER_LOST, "job " + ended + " ended before it handed over, and resuming it failed: " + e.getMessage());
    }
    out.println("      job " + writerJob + " in the seat of " + ended);
    return true;
  }

  /**
   * The options of {@code run} for the new job (or the ended writer's resumed one): those given, on
   * {@code slot} from {@code savepoint}, as the standby or in the seat of {@code resumes}, and
   * under java -jar with its embedded cluster's REST API on {@code restPort}.
   */
  private Configuration options(String slot, String savepoint, String resumes, Integer restPort) {
    Configuration options = new Configuration();
    given.toMap().forEach((k, v) -> {
      if (!k.startsWith("geofence.deploy.")) {
        options.setString(k, v);
      }
    });
    options.set(GeofenceOptions.SLOT, slot);
    if (resumes == null) {
      options.set(GeofenceOptions.STANDBY, true);
    } else {
      options.set(GeofenceOptions.RESUME_WRITER, resumes);
    }
    options.set(GeofenceOptions.FROM_SAVEPOINT, savepoint);
    if (restPort != null) {
      options.set(GeofenceOptions.REST_PORT, restPort);
    }
    return options;
  }

  /**
   * Builds the job as {@code run} would, on {@code slot} from {@code savepoint}, and submits it to
   * the cluster: as the standby, or in the seat of the ended writer {@code resumes}.
   */
  private String submit(String slot, String savepoint, String resumes) throws Exception {
    URI rest = URI.create(restUrl);
    Configuration options = options(slot, savepoint, resumes, null);
    options.set(DeploymentOptions.TARGET, "remote");
    options.set(RestOptions.ADDRESS, rest.getHost());
    options.set(RestOptions.PORT, rest.getPort() < 0 ? 8081 : rest.getPort());
    Path jar = Path.of(Deploy.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    if (Files.isRegularFile(jar)) {
      // The cluster runs the job's classes from this jar, as flink run ships it.
      options.set(PipelineOptions.JARS, List.of(jar.toUri().toString()));
    }
    JobClient job = GeofenceCommand.prepare(options, password).executeAsync();
    return job.getJobID().toString();
  }

  /**
   * Waits until the new job has asked for the handover (every subtask of its index ready),
   * printing what the ready probe says meanwhile; returns the row then.
   */
  private Handover.Row awaitAsked(Connection sink, String jobName, String job, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    String last = null;
    while (true) {
      Handover.Row row = Handover.read(sink, jobName).orElseThrow();
      if (job.equals(row.nextWriter()) || row.writer().equals(job)) {
        return row;
      }
      resumeEndedWriter();
      JsonNode status = get(newRestUrl, "/jobs/" + job, NOT_READY);
      String state = status.path("state").asText();
      if (TERMINAL.contains(state)) {
        throw new Failed(NOT_READY, "the new job " + job + " is " + state);
      }
      ReadinessProbe.Answer answer = ReadinessProbe.ask(newRestUrl, job, Duration.ofSeconds(10));
      if (System.nanoTime() > deadline) {
        throw new Failed(NOT_READY, "the new job " + job + " was not ready within " + ReadinessProbe.seconds(timeout.toMillis())
            + " (" + answer.line() + ")");
      }
      if (!answer.line().equals(last)) {
        out.println("      " + answer.line());
        last = answer.line();
      }
      Thread.sleep(1000);
    }
  }

  private void cancel(String rest, String job) throws Failed, InterruptedException {
    send(rest, "PATCH", "/jobs/" + job + "?mode=cancel", null, NOT_CLEANED_UP);
    long deadline = System.nanoTime() + Duration.ofMinutes(2).toNanos();
    while (!TERMINAL.contains(state(rest, job))) {
      if (System.nanoTime() > deadline) {
        throw new Failed(NOT_CLEANED_UP, "job " + job + " did not stop within 2 min of its cancel");
      }
      Thread.sleep(500);
    }
  }

  /** Drops {@code slot} once no job reads it (a cancelled job lets go of it within seconds); false if it is still read after a minute. */
  private boolean dropSlot(String url, String user, String password, String slot) throws Exception {
    try (Connection source = DriverManager.getConnection(url, user, password)) {
      long deadline = System.nanoTime() + Duration.ofMinutes(1).toNanos();
      while (true) {
        try {
          ReplicationSlots.dropIfUnused(source, slot);
          return true;
        } catch (IllegalStateException stillRead) {
          if (System.nanoTime() > deadline) {
            return false;
          }
          Thread.sleep(500);
        }
      }
    }
  }

  /**
   * The state of {@code job}; CANCELED once an embedded cluster's REST API is gone, since a job run
   * with java -jar takes its process, and so its cluster, with it when it ends.
   */
  private String state(String rest, String job) throws Failed, InterruptedException {
    try {
      return get(rest, "/jobs/" + job, NOT_CLEANED_UP).path("state").asText();
    } catch (Failed e) {
      if (newProcess != null && e.unreachable) {
        return "CANCELED";
      }
      throw e;
    }
  }

  private JsonNode get(String rest, String path, int status) throws Failed, InterruptedException {
    return send(rest, "GET", path, null, status);
  }

  private JsonNode send(String restUrl, String method, String path, String body, int status) throws Failed, InterruptedException {
    HttpRequest request = HttpRequest.newBuilder(URI.create(restUrl + path)).timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/json")
        .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body)).build();
    HttpResponse<String> response;
    try {
      response = http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      Failed unreachable = new Failed(status, "cannot reach Flink's REST API at " + restUrl + " (" + ReadinessProbe.why(e) + ")");
      unreachable.unreachable = true;
      throw unreachable;
    }
    if (response.statusCode() == 404) {
      throw new Failed(status, "Flink's REST API at " + restUrl + " knows no " + path);
    }
    if (response.statusCode() >= 300) {
      throw new Failed(status, "Flink's REST API at " + restUrl + " answered HTTP " + response.statusCode() + " to " + method + " "
          + path);
    }
    try {
      return response.body().isBlank() ? JSON.createObjectNode() : JSON.readTree(response.body());
    } catch (IOException e) {
      throw new Failed(status, restUrl + " did not answer " + method + " " + path + " with JSON; is it Flink's REST API?");
    }
  }

  private static List<Flag> concat(List<Flag> a, List<Flag> b) {
    List<Flag> all = new ArrayList<>(a);
    all.addAll(b);
    return all;
  }

  /** A deploy that ended early, with the status it exits with. */
  private static final class Failed extends Exception {
    private static final long serialVersionUID = 1L;
    private final int status;
    /** Whether the REST API did not answer at all. */
    private boolean unreachable;

    Failed(int status, String message) {
      super(message);
      this.status = status;
    }
  }
}
