package dev.geofence.job.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;

/**
 * The new job of a deploy whose running job was started with {@code java -jar}: the same command,
 * {@code run}, in a JVM of its own started as this one was (its options, its class path: the jar
 * and its {@code lib/}), so that it has an embedded cluster of its own. Every option goes as
 * {@code -Dkey=value}, as {@code run} reads it; the database password reaches it through the
 * environment it inherits, never the command line. It outlives the deploy.
 */
final class NewProcess {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Process process;
  private final Path log;

  private NewProcess(Process process, Path log) {
    this.process = process;
    this.log = log;
  }

  /** Starts {@code run} with {@code options}, its output (both streams) appended to {@code log}. */
  static NewProcess start(Configuration options, Path log) throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(GeofenceCommand.class.getName());
    command.add("run");
    options.toMap().forEach((key, value) -> command.add("-D" + key + "=" + value));
    Process process = new ProcessBuilder(command).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
    return new NewProcess(process, log);
  }

  long pid() {
    return process.pid();
  }

  Path log() {
    return log;
  }

  /**
   * Waits until the process's cluster at {@code rest} lists its job, and returns its id.
   *
   * @throws IllegalStateException in one sentence if the process ends first or the time runs out
   */
  String awaitJob(String rest, HttpClient http, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IllegalStateException("the new job's process exited with " + process.exitValue() + " before its job ran: see "
            + log.toAbsolutePath());
      }
      try {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(rest + "/jobs/overview"))
            .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() == 200) {
          for (JsonNode job : JSON.readTree(response.body()).path("jobs")) {
            return job.path("jid").asText();
          }
        }
      } catch (IOException notYet) {
        // Its cluster is still starting.
      }
      Thread.sleep(500);
    }
    process.destroy();
    throw new IllegalStateException("the new job's process did not run its job within " + timeout.toSeconds() + " s (stopped): see "
        + log.toAbsolutePath());
  }
}
