package dev.geofence.docker;

import static dev.geofence.docker.FreshMachine.freePort;
import static dev.geofence.docker.FreshMachine.strings;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.testing.Waiting;
import dev.geofence.state.readiness.LoadPhase;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README's demo commands (the demo, {@code ready} and {@code inspect} on its savepoint), run the
 * way a newcomer runs them: as separate processes from the built jars, in a fresh working directory
 * with a fresh {@code java.io.tmpdir} (so that the demo's PostgreSQL binaries are unpacked anew, as
 * on a machine where no test ever ran) and a fresh {@code HOME}, on free ports. The commands are
 * taken from README.md, so that the two cannot drift; docs/getting-started.md gives the same ones
 * ({@link GettingStartedITCase} runs that page's path against the user's own PostgreSQL).
 *
 * <p>The demo runs twice in one directory: the first run is stopped with a SIGTERM (as a service
 * manager stops it) and must leave a savepoint and no PostgreSQL behind; the second restores from
 * that savepoint on the existing database and slot and is stopped with Ctrl-C (SIGINT to its whole
 * process group). Meanwhile {@code ready} is asked as a readiness probe asks it, and the savepoint
 * tools read the savepoint the first run took.
 */
class FirstContactITCase {

  private static final Path REPO = Path.of("").toAbsolutePath().getParent();
  private static final Pattern TRIGGER_LINE = Pattern.compile("(?m)^  (ENTER|EXIT) +object-\\d+ +fence-\\d+ +at ");
  private static final Pattern SAVEPOINT_LINE = Pattern.compile("\\[demo] savepoint (file:\\S+);");
  /** What run logs as the job is submitted, the demo's run included. */
  private static final Pattern JOB_LINE = Pattern.compile("Job \\S+ submitted as ([0-9a-f]{32}), its checkpoints under (file:\\S+)");

  @TempDir Path temp;

  private final List<String> phasesSeen = new CopyOnWriteArrayList<>();

  @Test
  void readmesDemoReadyProbeAndSavepointToolsWorkOnAFreshMachine() throws Exception {
    String readme = Files.readString(REPO.resolve("README.md"));
    String demo = command(readme, "java -jar (\\S+geofence-job\\.jar) demo");
    String ready = command(readme, "java -jar (\\S+geofence-job\\.jar) ready --rest-url http://localhost:8081");
    String tools = command(readme, "java -jar (\\S+geofence-savepoints\\.jar) inspect geofence-demo/savepoints/");
    assertThat(REPO.resolve(demo)).as("the job jar; the job module's package phase builds it").isRegularFile();
    assertThat(REPO.resolve(tools)).as("the savepoint tools' jar; the savepoints module's package phase builds it").isRegularFile();

    Path work = Files.createDirectories(temp.resolve("newcomer"));
    Path home = Files.createDirectories(temp.resolve("home"));
    Path tmp = Files.createDirectories(temp.resolve("tmp"));
    int pgPort = freePort();
    int restPort = freePort();
    User user = new User(work, home, tmp);
    String restUrl = "http://localhost:" + restPort;
    String[] demoArgs = {"--port", Integer.toString(pgPort), "--rest-port", Integer.toString(restPort)};

    // First run: binaries unpacked into the new tmpdir, fences loaded, then a SIGTERM.
    Running first = user.start(List.of("java", "-Djava.io.tmpdir=" + tmp, "-jar", REPO.resolve(demo).toString(), "demo"), demoArgs);
    try {
      Probes probes = new Probes(user, REPO.resolve(ready), restUrl);
      probes.start();
      long firstTrigger = first.awaitOutput(TRIGGER_LINE, 120);
      System.out.printf("[first contact] fresh machine: first trigger printed %.1f s after java -jar ... demo%n", firstTrigger / 1000.0);
      probes.awaitReady(60);
      first.awaitOutputMatching("the tail to show ENTER and EXIT lines",
          o -> TRIGGER_LINE.matcher(o).results().map(m -> m.group(1)).collect(Collectors.toSet()).size() == 2, 60);
      assertThat(first.output()).contains("[demo] index ready: 2 of 2 subtasks, 2000 fences; evaluating locations");
      try (Connection db = connect(pgPort)) {
        assertThat(strings(db, "SELECT DISTINCT kind FROM geofence_triggers")).contains("ENTER", "EXIT");
        assertThat(strings(db, "SELECT subtask || ' ' || start_mode || ' ' || (hydrated_at IS NOT NULL) FROM hydration_history"
            + " WHERE job_name = 'geofence-demo'")).containsExactlyInAnyOrder("0 fresh true", "1 fresh true");
      }
      assertThat(user.run(List.of("java", "-jar", REPO.resolve(ready).toString(), "ready", "--rest-url", "localhost:" + restPort)))
          .as("a bad command line").satisfies(r -> {
            assertThat(r.status).isEqualTo(2);
            assertThat(r.err).startsWith("geofence: option --rest-url must look like http://host:8081");
          });
      assertOnlyLoopbackListens(first.process);
      // A newcomer watches the demo for a while before stopping it: it edits fences and checkpoints
      // meanwhile, which the savepoint and the restore then carry. The run itself is the behaviour
      // under test, not a wait for something.
      Thread.sleep(Math.max(0, 40_000 - (System.currentTimeMillis() - first.startedAt)));
      try (Connection db = connect(pgPort)) {
        assertThat(strings(db, "SELECT DISTINCT kind || ' ' || cause FROM geofence_triggers"))
            .as("the first parking object DWELLs in its depot, the first silent one falls silent in its yard")
            .contains("ENTER location", "EXIT location", "DWELL loitering", "EXIT silence");
      }
      first.process.destroy(); // SIGTERM, as systemd, Docker or kill stop it
      first.awaitExit(120);
    } finally {
      first.kill();
    }
    String firstOutput = first.output();
    assertThat(firstOutput).contains("[demo] stopping the job with a savepoint", "[demo] PostgreSQL stopped")
        .doesNotContain("Exception in thread");
    assertThat(postgresProcessesOn(work)).as("PostgreSQL processes left behind").isEmpty();
    Matcher savepointLine = SAVEPOINT_LINE.matcher(firstOutput);
    assertThat(savepointLine.find()).as("the demo reports its savepoint:%n%s", firstOutput).isTrue();
    Path savepoint = Path.of(URI.create(savepointLine.group(1)));
    assertThat(savepoint.resolve("_metadata")).isRegularFile();

    // The savepoint tools on it, as README's demo gives them: their output is only their own.
    Result help = user.run(List.of("java", "-jar", REPO.resolve(tools).toString(), "--help"));
    assertThat(help.status).isZero();
    assertThat(help.out).startsWith("Usage: java -jar geofence-savepoints.jar inspect SAVEPOINT");
    assertThat(help.err).isEmpty();
    Result inspect = user.run(List.of("java", "-jar", REPO.resolve(tools).toString(), "inspect", savepoint.toString()));
    assertThat(inspect.status).as(inspect.out + inspect.err).isZero();
    assertThat(inspect.err).as("stderr of inspect").doesNotContain("SLF4J", " WARN ", " INFO ");
    assertThat(inspect.out).containsPattern("(?m)^fences +[1-9][0-9,]* live, ");
    damagedCopiesAreRefusedInOneSentence(user, savepoint, REPO.resolve(demo), REPO.resolve(tools));

    // Second run in the same directory: existing data, tables and slot; restored from the savepoint.
    Running second = user.start(List.of("java", "-Djava.io.tmpdir=" + tmp, "-jar", REPO.resolve(demo).toString(), "demo"), demoArgs);
    try {
      Probes probes = new Probes(user, REPO.resolve(ready), restUrl);
      probes.start();
      long firstTrigger = second.awaitOutput(TRIGGER_LINE, 120);
      System.out.printf("[first contact] warm machine, restored demo: first trigger printed %.1f s after java -jar ... demo%n", firstTrigger / 1000.0);
      probes.awaitReady(60);
      assertThat(second.output()).contains("[demo] restarting PostgreSQL", "fences from the last run are in PostgreSQL",
          "[demo] restoring the job from " + savepoint,
          "[demo] the moving objects go on where the savepoint left them, their timeline moved on by the time the job was stopped");
      // The restored job's log names what in-use asks for; restored in LEGACY mode with no
      // materialization yet, its checkpoints (or, before the first, a failover) need the savepoint.
      Matcher jobLine = JOB_LINE.matcher(second.output());
      assertThat(jobLine.find()).as("the demo names its job and checkpoints:%n%s", second.output()).isTrue();
      Result inUse = user.run(List.of("java", "-jar", REPO.resolve(tools).toString(), "in-use", savepoint.toString(),
          "--checkpoint-dir", jobLine.group(2), "--job-id", jobLine.group(1)));
      assertThat(inUse.status).as(inUse.out + inUse.err).isEqualTo(1);
      assertThat(inUse.out).contains(" in use: job " + jobLine.group(1));
      try (Connection db = connect(pgPort)) {
        assertThat(strings(db, "SELECT subtask || ' ' || start_mode || ' ' || (hydrated_at IS NOT NULL) FROM hydration_history"
            + " WHERE job_name = 'geofence-demo'")).containsExactlyInAnyOrder("0 fresh true", "1 fresh true", "0 savepoint true", "1 savepoint true");
        // The restored generator goes on from its savepoint's sequence number, on the first run's
        // timeline moved on by the time the job was stopped: stamped ahead by the first run's
        // length instead, its locations were held that long (and past the clock skew, refused).
        // Measured from the restored index's readiness, which a slow host delays as much as the
        // source's start.
        String firstOfThisRun = "SELECT (extract(epoch FROM min(event_time)) * 1000)::bigint FROM geofence_triggers"
            + " WHERE event_time >= to_timestamp(" + second.startedAt + " / 1000.0)";
        String firstTime = Waiting.until("a trigger stamped after the restored demo started", Duration.ofSeconds(90),
            () -> strings(db, firstOfThisRun).get(0), Objects::nonNull);
        long readyAt = Long.parseLong(strings(db, "SELECT (extract(epoch FROM max(hydrated_at)) * 1000)::bigint FROM hydration_history"
            + " WHERE job_name = 'geofence-demo' AND start_mode = 'savepoint'").get(0));
        long stampedAfterReady = Long.parseLong(firstTime) - readyAt;
        System.out.printf("[first contact] restored demo: its first location that triggered was stamped %.1f s after the index was ready%n",
            stampedAfterReady / 1000.0);
        assertThat(stampedAfterReady).as("ms from the restored index's readiness to its first location's trigger time").isLessThan(10_000);
      }
      Result verify = user.run(List.of("java", "-jar", REPO.resolve(tools).toString(), "verify", savepoint.toString(),
          "--source-url", "jdbc:postgresql://localhost:" + pgPort + "/postgres", "--source-user", "postgres"));
      assertThat(verify.status).as("verify of the first run's savepoint against the database:%n%s%s", verify.out, verify.err).isZero();
      assertOnlyLoopbackListens(second.process);
      // Ctrl-C: SIGINT to the whole foreground process group, the launcher and the job's JVM alike.
      assertThat(processGroup(second.process.pid())).as("the demo leads a process group of its own")
          .isEqualTo(second.process.pid()).isNotEqualTo(processGroup(ProcessHandle.current().pid()));
      assertThat(new ProcessBuilder("kill", "-s", "INT", "--", "-" + second.process.pid()).inheritIO().start().waitFor()).isZero();
      second.awaitExit(120);
    } finally {
      second.kill();
    }
    assertThat(second.output()).contains("[demo] stopping the job with a savepoint", "[demo] PostgreSQL stopped")
        .containsPattern(SAVEPOINT_LINE.pattern()).doesNotContain("Exception in thread");
    assertThat(postgresProcessesOn(work)).as("PostgreSQL processes left behind").isEmpty();
    // A probe is a JVM start (a second or two), and 2,000 fences load in less: whether one lands
    // inside a load phase is chance (with one prober, a run alone once saw none), which the two
    // probers half a round apart make likelier. What the user must see is exit 1 naming each
    // subtask's state before ready; ReadinessProbeTest holds the load phases' words, against an
    // operator whose gauges stay in each phase until told.
    Set<String> phases = Arrays.stream(LoadPhase.values()).map(LoadPhase::toString).collect(Collectors.toSet());
    phases.addAll(List.of("initializing", "deploying", "scheduled", "created"));
    assertThat(phasesSeen).as("ready answered exit 1 naming a subtask's state before the index was ready, in one of the runs")
        .anyMatch(line -> phases.stream().anyMatch(p -> line.matches("not ready: subtask \\d+ " + Pattern.quote(p) + ".*")));
  }

  /** Field 5 of /proc/PID/stat (after the parenthesised command name, which may hold spaces). */
  /**
   * Copies of the savepoint with its metadata cut short, and with its largest state file cut
   * short: {@code run --from-savepoint} refuses each before any job or database, and {@code
   * inspect} says the same, in one sentence naming the file.
   */
  private void damagedCopiesAreRefusedInOneSentence(User user, Path savepoint, Path jobJar, Path toolsJar) throws Exception {
    Path metadataCut = copy(savepoint, temp.resolve("damaged-metadata"));
    Path metadata = metadataCut.resolve("_metadata");
    Files.write(metadata, Arrays.copyOf(Files.readAllBytes(metadata), (int) Files.size(metadata) / 2));
    Path stateCut = copy(savepoint, temp.resolve("damaged-state"));
    Path largest;
    try (Stream<Path> files = Files.list(stateCut)) {
      largest = files.filter(f -> !f.getFileName().toString().equals("_metadata"))
          .max((a, b) -> Long.compare(a.toFile().length(), b.toFile().length())).orElseThrow();
    }
    long length = Files.size(largest);
    Files.write(largest, Arrays.copyOf(Files.readAllBytes(largest), (int) length - 1));
    String[][] cases = {
      {metadataCut.toString(), "savepoint " + metadataCut + " cannot be read (", ""},
      {stateCut.toString(), "savepoint " + stateCut + " cannot be read: its state file ",
          largest.getFileName() + " is " + (length - 1) + " bytes where the savepoint wrote " + length},
    };
    for (String[] c : cases) {
      Result run = user.run(List.of("java", "-jar", jobJar.toString(), "run", "--source-url", "jdbc:postgresql://127.0.0.1:" + freePort() + "/none",
          "--source-user", "nobody", "--locations", "file:" + temp.resolve("no-inbox"), "--from-savepoint", c[0]));
      assertThat(run.status).as(run.out + run.err).isEqualTo(2);
      assertThat(run.err.strip()).as("one line on stderr").startsWith("geofence: " + c[1]).contains(c[2]).doesNotContain("\n");
      Result inspect = user.run(List.of("java", "-jar", toolsJar.toString(), "inspect", c[0]));
      assertThat(inspect.status).as(inspect.out + inspect.err).isEqualTo(2);
      assertThat(inspect.err.strip()).as("one line on stderr").startsWith("geofence-savepoints: " + c[1]).contains(c[2])
          .doesNotContain("\n");
    }
  }

  private static Path copy(Path directory, Path to) throws IOException {
    Files.createDirectories(to);
    try (Stream<Path> files = Files.list(directory)) {
      for (Path f : files.toList()) {
        Files.copy(f, to.resolve(f.getFileName()));
      }
    }
    return to;
  }

  private static long processGroup(long pid) throws IOException {
    String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
    return Long.parseLong(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[2]);
  }

  /** A command of README's, with the jar's path relative to the repository; fails if README lost it. */
  private static String command(String readme, String regex) {
    Matcher m = Pattern.compile(regex).matcher(readme);
    assertThat(m.find()).as("README.md gives the command %s", regex).isTrue();
    return m.group(1);
  }

  /** Every socket the demo's JVMs listen on is a loopback one (Linux: /proc/PID/net and fds). */
  private static void assertOnlyLoopbackListens(Process launcher) throws IOException {
    List<ProcessHandle> jvms = Stream.concat(Stream.of(launcher.toHandle()), launcher.descendants())
        .filter(p -> p.info().command().map(c -> c.endsWith("/java")).orElse(false)).toList();
    assertThat(jvms).as("the launcher and the JVM it starts").hasSize(2);
    List<String> listening = new ArrayList<>();
    for (ProcessHandle jvm : jvms) {
      Set<String> inodes = socketInodes(jvm.pid());
      for (String table : List.of("tcp", "tcp6")) {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(jvm.pid()), "net", table)).stream().skip(1).toList()) {
          String[] f = line.trim().split("\\s+");
          if (f[3].equals("0A") && inodes.contains(f[9])) { // 0A: LISTEN
            listening.add(f[1]);
          }
        }
      }
    }
    assertThat(listening).as("listening sockets of the demo (hex address:port)").isNotEmpty()
        .allMatch(FirstContactITCase::isLoopback, "on a loopback address");
  }

  private static Set<String> socketInodes(long pid) throws IOException {
    Set<String> inodes = new HashSet<>();
    try (Stream<Path> fds = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
      for (Path fd : fds.toList()) {
        try {
          Matcher m = Pattern.compile("socket:\\[(\\d+)]").matcher(Files.readSymbolicLink(fd).toString());
          if (m.matches()) {
            inodes.add(m.group(1));
          }
        } catch (IOException closedMeanwhile) {
          // the descriptor went away while listing
        }
      }
    }
    return inodes;
  }

  /** /proc's hex form: 127.x.x.x is 7F in the last byte (little endian); ::1 and ::ffff:127.x.x.x in IPv6. */
  private static boolean isLoopback(String address) {
    String host = address.substring(0, address.indexOf(':'));
    if (host.length() == 8) {
      return host.endsWith("7F");
    }
    return host.equals("00000000000000000000000001000000") || (host.startsWith("0000000000000000FFFF0000") && host.endsWith("7F"));
  }

  private static List<String> postgresProcessesOn(Path dir) {
    String data = dir.toString();
    return ProcessHandle.allProcesses()
        .filter(p -> p.info().commandLine().map(c -> c.contains("postgres") && c.contains(data)).orElse(false))
        .map(p -> p.pid() + " " + p.info().commandLine().orElse("")).toList();
  }

  private static Connection connect(int port) throws Exception {
    return DriverManager.getConnection("jdbc:postgresql://localhost:" + port + "/postgres", "postgres", "");
  }


  /** A newcomer's shell: their working directory, HOME and temporary directory, nothing of the build's. */
  private record User(Path work, Path home, Path tmp) {

    /**
     * Starts a command in a session of its own, as a terminal's foreground job, with every signal
     * at its default (a build started in the background may have SIGINT ignored, which its
     * children inherit); output to a file.
     */
    Running start(List<String> command, String... extra) throws IOException {
      List<String> all = new ArrayList<>(List.of("setsid", "env", "--default-signal"));
      all.addAll(command);
      all.addAll(List.of(extra));
      File output = Files.createTempFile(tmp, "demo", ".out").toFile();
      ProcessBuilder builder = environment(new ProcessBuilder(all)).redirectErrorStream(true).redirectOutput(output);
      System.out.println("$ " + String.join(" ", all));
      return new Running(builder.start(), output.toPath(), System.currentTimeMillis());
    }

    Result run(List<String> command) throws Exception {
      File out = Files.createTempFile(tmp, "cmd", ".out").toFile();
      File err = Files.createTempFile(tmp, "cmd", ".err").toFile();
      Process p = environment(new ProcessBuilder(command)).redirectOutput(out).redirectError(err).start();
      assertThat(p.waitFor(3, TimeUnit.MINUTES)).as("%s finished within 3 minutes", command).isTrue();
      Result r = new Result(p.exitValue(), Files.readString(out.toPath()), Files.readString(err.toPath()));
      System.out.printf("$ %s%n%s%s(exit %d)%n", String.join(" ", command), r.out, r.err, r.status);
      return r;
    }

    private ProcessBuilder environment(ProcessBuilder builder) {
      builder.directory(work.toFile());
      Map<String, String> env = builder.environment();
      env.put("HOME", home.toString());
      env.put("TMPDIR", tmp.toString());
      env.remove("MAVEN_OPTS");
      env.remove("JAVA_TOOL_OPTIONS");
      return builder;
    }
  }

  private record Result(int status, String out, String err) {}

  private record Running(Process process, Path outputFile, long startedAt) {

    String output() throws IOException {
      return Files.readString(outputFile, StandardCharsets.UTF_8);
    }

    /** Milliseconds from the start until the output first matched, failing after {@code seconds}. */
    long awaitOutput(Pattern pattern, int seconds) throws Exception {
      awaitOutputMatching("'" + pattern + "' in the demo's output", o -> pattern.matcher(o).find(), seconds);
      return System.currentTimeMillis() - startedAt;
    }

    /** Waits until the output satisfies {@code condition}; fails at once if the demo ends first. */
    void awaitOutputMatching(String what, Predicate<String> condition, int seconds) throws Exception {
      Waiting.until(what, Duration.ofSeconds(seconds), () -> {
        String output = output();
        assertThat(condition.test(output) || process.isAlive()).as("the demo ended early:%n%s", output).isTrue();
        return output;
      }, condition);
    }

    void awaitExit(int seconds) throws Exception {
      assertThat(process.waitFor(seconds, TimeUnit.SECONDS)).as("the demo ended within %d s of the signal:%n%s", seconds, output()).isTrue();
      System.out.println(output());
    }

    void kill() {
      process.descendants().forEach(ProcessHandle::destroyForcibly);
      process.destroyForcibly();
    }
  }

  /**
   * {@code ready} asked every few hundred milliseconds, as a readiness probe asks, until exit 0: by
   * two probers, the second half a round behind the first, since each answer costs a JVM start and
   * the demo's index loads in about as long (two kubelets' worth, so that one lands in a load phase
   * more often than by chance).
   */
  private final class Probes {
    private final User user;
    private final Path jar;
    private final String restUrl;
    private final List<Thread> probers = new ArrayList<>();
    private volatile boolean ready;
    private volatile Throwable failure;

    Probes(User user, Path jar, String restUrl) {
      this.user = user;
      this.jar = jar;
      this.restUrl = restUrl;
    }

    void start() {
      for (long delay : new long[] {0, 1_000}) {
        Thread prober = new Thread(() -> probe(delay), "ready-prober-" + delay);
        prober.setDaemon(true);
        probers.add(prober);
        prober.start();
      }
    }

    private void probe(long delay) {
      try {
        Thread.sleep(delay);
        while (!ready) {
          // README's command as typed, with its default timeout: under a 2 s one, a CI host busy
          // with the warm-up let Flink's REST API answer too late for every probe inside the load
          // phases, in both runs (2026-12-07).
          Result r = user.run(List.of("java", "-jar", jar.toString(), "ready", "--rest-url", restUrl));
          assertThat(r.status).as("exit status of ready: %s%s", r.out, r.err).isIn(0, 1);
          assertThat(r.out).as("ready prints one line").hasLineCount(1);
          phasesSeen.add(r.out.strip());
          assertThat(r.out).startsWith(r.status == 0 ? "ready: 2 of 2 subtasks, " : "not ready: ");
          ready |= r.status == 0;
          Thread.sleep(500); // the probe's period: what is tested is ready asked as a kubelet asks it
        }
      } catch (Throwable e) {
        failure = e;
      }
    }

    void awaitReady(int seconds) throws Exception {
      long until = System.currentTimeMillis() + seconds * 1000L;
      for (Thread prober : probers) {
        prober.join(Math.max(1, until - System.currentTimeMillis()));
      }
      if (failure != null) {
        throw new AssertionError("a ready probe failed", failure);
      }
      assertThat(ready).as("ready answered exit 0 within %d s; its answers: %s", seconds, phasesSeen).isTrue();
    }
  }
}
