package dev.geofence.docker;

import static dev.geofence.docker.FreshMachine.freePort;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.sink.Handover;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * A blue/green deploy of a job run with {@code java -jar}, as a user types it: the running job is
 * {@code java -jar geofence-job.jar run ... --handover}, a process with its own embedded cluster;
 * {@code deploy --new-rest-port} (a process too) starts the new job with {@code java -jar} in a
 * process of its own beside it, hands the outputs over, cancels the old job (whose process then
 * ends) and drops its slot. Triggers and presence are the oracle's before and after; the new job's
 * gap check finds the copied slot covering its savepoint. A second deploy's old job has its
 * process killed after the ask: deploy resumes it from its newest checkpoint in a process of its
 * own, and the outputs end as the oracle's all the same.
 */
class JarDeployITCase extends EndToEndFixture {

  private static final Pattern DEPLOYED = Pattern.compile("Deployed: job ([0-9a-f]{32}) on slot (\\S+)");
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Path module = Path.of("").toAbsolutePath();
  private final Path jobJar = module.resolve("../job/target/geofence-job.jar").normalize();
  private final HttpClient http = HttpClient.newHttpClient();

  @Test
  void deployStartsTheNewJobWithJavaJarBesideTheRunningOneAndHandsOver() throws Exception {
    assertThat(jobJar).as("the job jar; build the job module first (mvn -B -DskipTests install -pl state,connectors,job)").exists();
    database("geofence_jar_deploy", 41);
    placeFences(0, 30);
    int oldPort = freePort();
    int newPort = freePort();
    String oldSlot = slot;
    Process old = null;
    ProcessHandle next = null;
    try {
      List<String> run = new ArrayList<>(List.of(java(), "-jar", jobJar.toString(), "run", "--rest-port", Integer.toString(oldPort)));
      run.addAll(jobOptions(oldSlot));
      old = start(run, temp, temp.resolve("old.out"));
      String oldJob = awaitJob(oldPort, old, temp.resolve("old.out"));
      awaitReady(oldPort, oldJob);
      moveObjects();
      assertTriggersAsOracle();

      List<String> deploy = new ArrayList<>(List.of(java(), "-jar", jobJar.toString(), "deploy",
          "--rest-url", "http://127.0.0.1:" + oldPort, "--from-job", oldJob, "--new-slot", oldSlot + "_green",
          "--new-rest-port", Integer.toString(newPort)));
      deploy.addAll(jobOptions(oldSlot));
      Path cwd = Files.createDirectories(temp.resolve("deploy"));
      Process deploying = start(deploy, cwd, temp.resolve("deploy.out"));
      boolean ended = deploying.waitFor(5, TimeUnit.MINUTES);
      String text = Files.readString(temp.resolve("deploy.out"), StandardCharsets.UTF_8);
      System.out.println("$ java -jar geofence-job.jar deploy ... --new-rest-port " + newPort + "\n" + text);
      assertThat(ended).as("deploy ended within 5 min").isTrue();
      assertThat(deploying.exitValue()).as(text).isZero();
      assertThat(text).contains("- Starting the new job from it with java -jar, as a standby on " + oldSlot + "_green",
          "- Handing the outputs over", "- Cancelling " + oldJob);
      Matcher deployed = DEPLOYED.matcher(text);
      assertThat(deployed.find()).isTrue();
      String newJob = deployed.group(1);
      assertThat(cwd.resolve(oldSlot + "_green.log")).as("the new job's output, named in deploy's output").isRegularFile();
      // deploy's child, not this test's: it outlives deploy, and its cluster ends with its job.
      next = ProcessHandle.of(Long.parseLong(find(Pattern.compile("process (\\d+), its output in"), text))).orElseThrow();

      assertThat(old.waitFor(2, TimeUnit.MINUTES)).as("the old job's process ends with its job").isTrue();
      assertThat(SlotProbe.read(db, oldSlot).exists()).as("the old job's slot dropped").isFalse();
      assertThat(Handover.read(db, "geofence").orElseThrow().writer()).isEqualTo(newJob);
      slot = oldSlot + "_green";
      moveObjects();
      assertTriggersAsOracle();
      assertPresenceAsOracle();
      assertThat(assertWarmUps(newJob, 1, "savepoint")).allSatisfy(e -> assertThat(e.gapCheck()).as("gap check of %s", e)
          .isEqualTo("covered"));

      // The next deploy, whose old job's process is killed after the new job asked for the handover
      // and before the old one committed its share: deploy resumes it from its newest checkpoint,
      // in a process of its own on its port, and the handover goes on with it.
      int purplePort = freePort();
      List<String> again = new ArrayList<>(List.of(java(), "-jar", jobJar.toString(), "deploy",
          "--rest-url", "http://127.0.0.1:" + newPort, "--from-job", newJob, "--new-slot", oldSlot + "_purple",
          "--new-rest-port", Integer.toString(purplePort)));
      again.addAll(jobOptions(oldSlot + "_green"));
      Process redeploying = start(again, cwd, temp.resolve("redeploy.out"));
      Waiting.until("the newest job to ask for the handover", PATIENCE, () -> Handover.read(db, "geofence").orElseThrow(),
          row -> row.nextWriter() != null);
      assertThat(Handover.read(db, "geofence").orElseThrow().subtasksDone()).as("the old job's share still open").isZero();
      next.destroyForcibly();
      boolean redeployed = redeploying.waitFor(5, TimeUnit.MINUTES);
      String retext = Files.readString(temp.resolve("redeploy.out"), StandardCharsets.UTF_8);
      System.out.println("$ java -jar geofence-job.jar deploy ... (its old job's process killed)\n" + retext);
      if (!redeployed) {
        redeploying.destroyForcibly();
        try (var logs = Files.list(cwd)) {
          for (Path log : logs.toList()) {
            List<String> lines = Files.readAllLines(log, StandardCharsets.ISO_8859_1).stream()
                .filter(l -> !l.startsWith("\tat ")).toList();
            System.out.println("---- " + log + " but for stack frames\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 150), lines.size())));
          }
        }
      }
      assertThat(redeployed).as("deploy ended within 5 min").isTrue();
      assertThat(redeploying.exitValue()).as(retext).isZero();
      assertThat(retext).contains("- Job " + newJob + " ended with its process before it handed over: resuming it from its last"
          + " checkpoint, on " + oldSlot + "_green, in a process of its own");
      Matcher purple = DEPLOYED.matcher(retext);
      assertThat(purple.find()).isTrue();
      assertThat(SlotProbe.read(db, oldSlot + "_green").exists()).as("the old slot dropped after its resumed job").isFalse();
      slot = oldSlot + "_purple";
      moveObjects();
      assertTriggersAsOracle();
      assertPresenceAsOracle();
      next = ProcessHandle.of(Long.parseLong(find(Pattern.compile("as a standby on \\S+, its REST API at \\S+\n +process (\\d+)"),
          retext))).orElseThrow();
      cancel(purplePort, purple.group(1));
      ProcessHandle running = next;
      Waiting.until("the newest job's process to end with its job", PATIENCE, running::isAlive, alive -> !alive);
    } finally {
      if (old != null) {
        old.destroyForcibly();
      }
      if (next != null) {
        next.destroyForcibly();
      }
    }
  }

  /**
   * The options both jobs run with, as a user gives them to run and to deploy alike. Without the
   * changelog: under it (the default), the job whose process the case kills was restored from a
   * savepoint less than a materialization interval (10 min) before, and Flink 1.20 names that
   * savepoint's file in its checkpoints relative to the checkpoint's directory, where a new job
   * does not find it (docs/operations.md; SavepointFilesTest): deploy then exits 8. The session
   * cluster's deploys run with the changelog (HandoverITCase).
   */
  private List<String> jobOptions(String slotName) {
    return List.of("--source-url", url, "--source-user", user, "--slot", slotName, "--locations", "file:" + inbox,
        "--parallelism", "1", "--checkpoint-interval", "1s", "--heartbeat-interval", "300ms", "--state-backend", "rocksdb",
        "--checkpoint-dir", temp.resolve("checkpoints").toUri().toString(),
        "--savepoint-dir", temp.resolve("savepoints").toUri().toString(),
        "--handover", "--allowed-lateness", "5s", "-Dstate.changelog.enabled=false");
  }

  private static String java() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  /** Starts {@code command} in {@code cwd} with the fence database's password in its environment, its output to {@code out}. */
  private Process start(List<String> command, Path cwd, Path out) throws Exception {
    ProcessBuilder builder = new ProcessBuilder(command).directory(cwd.toFile()).redirectErrorStream(true)
        .redirectOutput(out.toFile());
    builder.environment().put(GeofenceOptions.PASSWORD_ENV, password);
    Process process = builder.start();
    process.getOutputStream().close();
    return process;
  }

  private String awaitJob(int port, Process process, Path out) throws Exception {
    return Waiting.until("the job of the java -jar process to run", PATIENCE, () -> {
      assertThat(process.isAlive()).as("the java -jar process:%n%s", Files.readString(out)).isTrue();
      try {
        for (JsonNode job : rest(port, "/jobs/overview").path("jobs")) {
          return job.path("jid").asText();
        }
      } catch (java.io.IOException notYet) {
        // still starting
      }
      return "";
    }, id -> !id.isEmpty());
  }

  private void awaitReady(int port, String job) throws Exception {
    Waiting.until("the job's index to be ready", PATIENCE, () -> {
      Process ready = new ProcessBuilder(java(), "-jar", jobJar.toString(), "ready", "--rest-url", "http://127.0.0.1:" + port,
          "--job", job).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      return ready.waitFor(60, TimeUnit.SECONDS) && ready.exitValue() == 0;
    }, ok -> ok);
  }

  private void cancel(int port, String job) throws Exception {
    http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/jobs/" + job + "?mode=cancel"))
        .method("PATCH", HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
  }

  private JsonNode rest(int port, String path) throws Exception {
    HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
        HttpResponse.BodyHandlers.ofString());
    return JSON.readTree(response.body());
  }

  private static String find(Pattern pattern, String text) {
    Matcher m = pattern.matcher(text);
    assertThat(m.find()).as("'%s' in:%n%s", pattern, text).isTrue();
    return m.group(1);
  }
}
