package dev.geofence.connectors.kafka;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.Uuid;

/**
 * A real Kafka server (KRaft, broker and controller in one) in a JVM of its own, so that it can be
 * stopped the way a server is (SIGTERM) and started again on the same log directory and the same
 * ports: its clients reconnect to the address they know. Kafka's test kit cannot: its nodes pick
 * new ports and never start again. The server runs {@code kafka.Kafka} from the test's own class
 * path, formatted once with {@code kafka.tools.StorageTool}; its output goes to {@code server.log}
 * in its directory.
 */
final class BrokerProcess implements AutoCloseable {

  private static final Duration STOP_PATIENCE = Duration.ofSeconds(30);

  private final Path dir;
  private final Path config;
  private final int port;
  private Process server;

  private BrokerProcess(Path dir, Path config, int port) {
    this.dir = dir;
    this.config = config;
    this.port = port;
  }

  /**
   * Formats a log directory under {@code dir} for a one-node cluster on two free ports (clients',
   * controller's), kept for every start, and starts the server.
   */
  static BrokerProcess start(Path dir, List<String> settings) throws Exception {
    Files.createDirectories(dir);
    int port = freePort();
    int controllerPort = freePort();
    List<String> lines = new ArrayList<>(List.of(
        "process.roles=broker,controller",
        "node.id=1",
        "controller.quorum.voters=1@localhost:" + controllerPort,
        "listeners=PLAINTEXT://localhost:" + port + ",CONTROLLER://localhost:" + controllerPort,
        "advertised.listeners=PLAINTEXT://localhost:" + port,
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        "log.dirs=" + dir.resolve("logs")));
    lines.addAll(settings);
    Path config = Files.write(dir.resolve("server.properties"), lines);
    run(dir, List.of("kafka.tools.StorageTool", "format", "-t", Uuid.randomUuid().toString(), "-c", config.toString()), true);
    BrokerProcess broker = new BrokerProcess(dir, config, port);
    broker.startAgain();
    return broker;
  }

  int port() {
    return port;
  }

  /** Starts the server on its directory and ports; it is ready when clients can reach it, which is for the caller to wait for. */
  void startAgain() throws IOException {
    if (server != null && server.isAlive()) {
      throw new IllegalStateException("the Kafka server in " + dir + " is already running");
    }
    server = run(dir, List.of("kafka.Kafka", config.toString()), false);
  }

  /** Stops the server as an operator does, SIGTERM, and waits until it has shut down. */
  void stop() throws InterruptedException {
    if (server == null || !server.isAlive()) {
      return;
    }
    server.destroy();
    if (!server.waitFor(STOP_PATIENCE.toMillis(), TimeUnit.MILLISECONDS)) {
      server.destroyForcibly().waitFor();
      throw new IllegalStateException("the Kafka server in " + dir + " did not stop within " + STOP_PATIENCE + " of SIGTERM; killed");
    }
  }

  boolean isAlive() {
    return server != null && server.isAlive();
  }

  /** The end of the server's output, for a failure's message. */
  String logTail() {
    try {
      List<String> lines = Files.readAllLines(dir.resolve("server.log"));
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    } catch (IOException e) {
      return "(no server.log: " + e.getMessage() + ")";
    }
  }

  @Override
  public void close() throws InterruptedException {
    stop();
  }

  /**
   * Runs {@code main} in a JVM of the test's class path, output appended to {@code server.log};
   * with {@code await}, waits until it exits and fails unless it succeeded. A hook of this JVM
   * stops it should the test run end first.
   */
  private static Process run(Path dir, List<String> main, boolean await) throws IOException {
    String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    List<String> command = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        // A small server that starts fast: it holds a few test topics.
        "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classPath));
    command.addAll(main);
    File log = dir.resolve("server.log").toFile();
    Process process = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log)).start();
    Runtime.getRuntime().addShutdownHook(new Thread(process::destroyForcibly));
    if (await) {
      try {
        if (!process.waitFor(2, TimeUnit.MINUTES) || process.exitValue() != 0) {
          process.destroyForcibly();
          throw new IllegalStateException(main.get(0) + " failed in " + dir + ":\n" + Files.readString(log.toPath()));
        }
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while " + main.get(0) + " ran", e);
      }
    }
    return process;
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }
}
