package dev.geofence.job.cli;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarFile;

/**
 * The entry point of the job's jar and of the savepoint tools' jar: runs the command class its
 * jar's manifest names ({@code Geofence-Command}, logging with {@code Geofence-Log-Config}).
 * Submitted to a cluster, Flink is on the class path and the command runs as is. Run with {@code java -jar}, Flink (which the jar leaves out, as a cluster provides it) is
 * in the {@code lib/} directory built next to the jar: the command runs in a JVM started with the
 * jar and {@code lib/*} on its class path, so that Flink's embedded MiniCluster finds its own
 * classes the way it expects (a nested class loader does not do: Flink resolves job classes against
 * the system class loader). The JVM's own options and the jar's {@code Add-Opens} and {@code
 * Add-Exports} are passed on.
 */
public final class Launcher {

  /** The manifest attribute naming the jar's command class, whose {@code main} runs. */
  static final String COMMAND = "Geofence-Command";
  /** The manifest attribute naming the command's log4j2 configuration on the class path. */
  static final String LOG_CONFIG = "Geofence-Log-Config";

  /** How long a stopped command may take to end before it is killed. */
  private static final long CHILD_STOP_TIMEOUT_SECONDS = 90;

  private static final String FLINK_PROBE = "org.apache.flink.streaming.api.environment.StreamExecutionEnvironment";

  private Launcher() {}

  public static void main(String[] args) throws Exception {
    Path jar = Path.of(Launcher.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Attributes manifest;
    try (JarFile file = new JarFile(jar.toFile())) {
      manifest = file.getManifest().getMainAttributes();
    }
    String command = manifest.getValue(COMMAND);
    if (command.equals(GeofenceCommand.class.getName()) && args.length > 0 && args[0].equals("ready")) {
      // A readiness probe runs every few seconds and needs no Flink: no second JVM for it.
      System.exit(ReadinessProbe.command(args, System.out, System.err));
    }
    launch(jar, manifest, command, args);
  }

  /**
   * Runs {@code command}'s {@code main} with Flink on the class path: here if it is, else in a JVM
   * started with the jar and the {@code lib/} directory next to it, logging with the manifest's log
   * configuration unless the JVM names its own.
   */
  private static void launch(Path jar, Attributes manifest, String command, String[] args) throws Exception {
    if (isPresent(FLINK_PROBE)) {
      Class.forName(command).getMethod("main", String[].class).invoke(null, (Object) args);
      return;
    }
    Path lib = jar.resolveSibling("lib");
    if (!Files.isDirectory(lib)) {
      System.err.println("geofence: Flink is not on the class path and " + lib + " does not exist; run the jar with"
          + " flink run, or keep the lib/ directory built next to it");
      System.exit(2);
    }
    List<String> java = new ArrayList<>();
    java.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    List<String> jvmOptions = ManagementFactory.getRuntimeMXBean().getInputArguments();
    java.addAll(jvmOptions);
    if (jvmOptions.stream().noneMatch(o -> o.startsWith("-Dlog4j.configurationFile="))) {
      // The phases, gap checks and rebuilds on stderr; a cluster logs with its own configuration.
      java.add("-Dlog4j.configurationFile=classpath:" + manifest.getValue(LOG_CONFIG));
    }
    for (String module : manifest.getValue("Add-Opens").split(" ")) {
      java.add("--add-opens=" + module + "=ALL-UNNAMED");
    }
    for (String module : manifest.getValue("Add-Exports").split(" ")) {
      java.add("--add-exports=" + module + "=ALL-UNNAMED");
    }
    java.add("-cp");
    java.add(jar + File.pathSeparator + lib.resolve("*"));
    java.add(command);
    java.addAll(List.of(args));
    Process child = new ProcessBuilder(java).inheritIO().start();
    // A SIGTERM or Ctrl-C ends the command too, and this JVM waits for it: the demo stops its job
    // with a savepoint and then its PostgreSQL, which takes a few seconds.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      child.destroy();
      try {
        if (!child.waitFor(CHILD_STOP_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
          child.destroyForcibly();
        }
      } catch (InterruptedException e) {
        child.destroyForcibly();
      }
    }));
    System.exit(child.waitFor());
  }

  private static boolean isPresent(String className) {
    try {
      Class.forName(className, false, Launcher.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException e) {
      return false;
    }
  }
}
