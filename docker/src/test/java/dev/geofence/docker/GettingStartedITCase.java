package dev.geofence.docker;

import static dev.geofence.docker.FreshMachine.freePort;
import static dev.geofence.docker.FreshMachine.strings;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.testing.Waiting;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/getting-started.md, run as a new user runs it against their own PostgreSQL: here CI's
 * PostGIS ({@code GEOFENCE_POSTGIS_URL}). The commands are the page's code blocks marked {@code
 * <!-- step: NAME -->}, taken from the page, so that the two cannot drift; README's five-minute
 * path must show the same blocks. Each runs in {@code bash} from the repository's root, as a
 * process of its own, with a fresh {@code HOME}, {@code TMPDIR} and {@code java.io.tmpdir} (through
 * {@code JDK_JAVA_OPTIONS}, which every {@code java} reads, the job's second JVM too), and without
 * the build's {@code MAVEN_OPTS} or {@code JAVA_TOOL_OPTIONS}.
 *
 * <p>Three liberties, each one a user's own choice on the page: step {@code connection}'s
 * variables name a fresh database of this test's on CI's server (the step is checked to set
 * exactly psql's five variables); the REST port 8081 becomes a free one, so that nothing else on
 * the machine decides the outcome; and step {@code triggers}, which the page says to run again if a
 * row is missing, runs again until it shows the ENTER and the EXIT. The job runs in a terminal of
 * its own (a session, as a terminal's foreground job) and is stopped with Ctrl-C: SIGINT to its
 * process group.
 */
class GettingStartedITCase {

  private static final Path REPO = Path.of("").toAbsolutePath().getParent();
  private static final String POSTGIS_URL = "GEOFENCE_POSTGIS_URL";
  private static final Pattern STEP = Pattern.compile("<!-- step: ([a-z-]+) -->\n```[a-z]*\n(.*?)```\n", Pattern.DOTALL);
  private static final List<String> STEPS =
      List.of("connection", "migrate", "fence", "start", "ready", "locations", "triggers", "history");
  private static final String DATABASE = "getting_started";
  /** The slot the page's job uses: the job's default. */
  private static final String SLOT = "geofence";

  @TempDir Path temp;

  @Test
  void theGettingStartedCommandsReachEnterAndExitRowsFromTheUsersOwnPostgreSql() throws Exception {
    Map<String, String> steps = steps(REPO.resolve("docs/getting-started.md"));
    assertThat(steps.keySet()).as("the steps of docs/getting-started.md, in order").containsExactlyElementsOf(STEPS);
    Map<String, String> readme = steps(REPO.resolve("README.md"));
    assertThat(readme.keySet()).as("README's five-minute path").contains("migrate", "start", "ready", "triggers");
    readme.forEach((name, block) -> assertThat(block).as("README's step %s, as docs/getting-started.md gives it", name)
        .isEqualTo(steps.get(name)));
    Set<String> variables = new TreeSet<>();
    Matcher assignment = Pattern.compile("(\\w+)=").matcher(steps.get("connection"));
    while (assignment.find()) {
      variables.add(assignment.group(1));
    }
    assertThat(variables).as("the variables step connection sets").containsExactlyInAnyOrder(
        "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD");
    assertThat(REPO.resolve("job/target/geofence-job.jar")).as("the job jar; the job module's package phase builds it").isRegularFile();

    String server = System.getenv(POSTGIS_URL);
    assertThat(server).as("%s must name a PostgreSQL with PostGIS and wal_level=logical, user postgres/postgres"
        + " (bash .ci/postgis.sh starts one: jdbc:postgresql://127.0.0.1:55432/postgres)", POSTGIS_URL).isNotBlank();
    URI uri = URI.create(server.substring("jdbc:".length()));
    freshDatabase(server);
    int restPort = freePort();
    Shell user = new Shell(Files.createDirectories(temp.resolve("home")), Files.createDirectories(temp.resolve("tmp")),
        Map.of("PGHOST", uri.getHost(), "PGPORT", Integer.toString(uri.getPort()), "PGDATABASE", DATABASE,
            "PGUSER", "postgres", "PGPASSWORD", "postgres"));
    Map<String, String> commands = new LinkedHashMap<>();
    steps.forEach((name, block) -> commands.put(name, block.replace("8081", Integer.toString(restPort))));

    Terminal job = null;
    try {
      user.run("migrate", commands.get("migrate"), 120).succeeded();
      user.run("fence", commands.get("fence"), 60).succeeded();
      job = user.start(commands.get("start"));
      Terminal running = job;
      Result ready = user.run("ready", commands.get("ready"), 180, running::output);
      ready.succeeded();
      assertThat(ready.out).as("ready's last answer").contains("ready: 2 of 2 subtasks, 1 fences");
      user.run("locations", commands.get("locations"), 30).succeeded();
      Predicate<Result> both = r -> r.out.contains("ENTER") && r.out.contains("EXIT");
      Result triggers = Waiting.until("step triggers to show van-1's ENTER and EXIT of mitte", Duration.ofSeconds(90), () -> {
        Result r = user.run("triggers", commands.get("triggers"), 30).succeeded();
        if (!both.test(r)) {
          Thread.sleep(1000); // as a user asks again
        }
        return r;
      }, both);
      assertThat(triggers.out).containsPattern("van-1 +\\| mitte +\\| ENTER").containsPattern("van-1 +\\| mitte +\\| EXIT");
      assertThat(user.run("history", commands.get("history"), 30).succeeded().out).as("the warm-ups of the two subtasks")
          .containsPattern("(?m)^ +0 \\| fresh ").containsPattern("(?m)^ +1 \\| fresh ");
      try (Connection db = connect(server, DATABASE)) {
        assertThat(strings(db, "SELECT object_id || ' ' || fence_id || ' ' || kind FROM geofence_triggers ORDER BY event_time"))
            .as("the triggers, once each").containsExactly("van-1 mitte ENTER", "van-1 mitte EXIT");
        // Presence has a writer of its own (docs/outputs.md): its EXIT lands up to a batch interval after the trigger's.
        Waiting.until("geofence_presence to lose van-1's row after its EXIT", Duration.ofSeconds(30),
            () -> strings(db, "SELECT count(*) FROM geofence_presence"), rows -> rows.equals(List.of("0")));
      }
      job.interrupt();
      assertThat(job.awaitExit(60)).as("the job ended within 60 s of Ctrl-C:%n%s", job.output()).isTrue();
      assertThat(job.output()).doesNotContain("Exception in thread")
          .as("the job's id, which savepoints in-use asks for").containsPattern("Job \\S+ submitted as [0-9a-f]{32}");
    } finally {
      if (job != null) {
        job.kill();
      }
      dropDatabase(server);
    }
  }

  /** The page's marked code blocks, by step name, in the page's order. */
  static Map<String, String> steps(Path page) throws IOException {
    Map<String, String> steps = new LinkedHashMap<>();
    Matcher m = STEP.matcher(Files.readString(page, StandardCharsets.UTF_8));
    while (m.find()) {
      assertThat(steps.put(m.group(1), m.group(2))).as("%s marks step %s once", page.getFileName(), m.group(1)).isNull();
    }
    return steps;
  }

  /** The test's database on the server, new; the job's slot must be free (nothing else on CI's server uses it). */
  private static void freshDatabase(String server) throws Exception {
    dropDatabase(server);
    try (Connection db = connect(server, null)) {
      List<String> slot = strings(db, "SELECT database FROM pg_replication_slots WHERE slot_name = '" + SLOT + "'");
      assertThat(slot).as("a replication slot named %s already on the server, which the page's job would take", SLOT).isEmpty();
      try (Statement s = db.createStatement()) {
        s.execute("CREATE DATABASE " + DATABASE);
      }
    }
  }

  /** Drops the test's slot (once no job holds it) and database, if they are there. */
  private static void dropDatabase(String server) throws Exception {
    try (Connection db = connect(server, null)) {
      String ours = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + SLOT + "' AND database = '" + DATABASE + "'";
      Waiting.until("the stopped job to let go of the slot " + SLOT, Duration.ofSeconds(60),
          () -> strings(db, ours + " AND active").get(0), "0"::equals);
      if (!strings(db, ours).get(0).equals("0")) {
        strings(db, "SELECT pg_drop_replication_slot('" + SLOT + "')");
      }
      try (Statement s = db.createStatement()) {
        s.execute("DROP DATABASE IF EXISTS " + DATABASE);
      }
    }
  }

  private static Connection connect(String server, String database) throws Exception {
    String url = database == null ? server : server.substring(0, server.lastIndexOf('/') + 1) + database;
    return DriverManager.getConnection(url, "postgres", "postgres");
  }


  /** A user's shell in the repository's root: their HOME and temporary directory, their database's variables. */
  private record Shell(Path home, Path tmp, Map<String, String> connection) {

    Result run(String step, String command, int seconds) throws Exception {
      return run(step, command, seconds, () -> "");
    }

    /** Runs a step to its end; fails after {@code seconds}, with {@code context} (the job's output). */
    Result run(String step, String command, int seconds, Waiting.Probe<String> context) throws Exception {
      File out = Files.createTempFile(tmp, step, ".out").toFile();
      File err = Files.createTempFile(tmp, step, ".err").toFile();
      Process p = environment(new ProcessBuilder("bash", "-euo", "pipefail", "-c", command)).redirectOutput(out).redirectError(err)
          .start();
      boolean ended = p.waitFor(seconds, TimeUnit.SECONDS);
      if (!ended) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
      }
      Result r = new Result(step, ended ? p.exitValue() : -1, Files.readString(out.toPath()), Files.readString(err.toPath()));
      System.out.printf("$ %s%n%s%s(exit %d)%n", command.strip(), r.out, r.err, r.status);
      assertThat(ended).as("step %s finished within %d s; its output:%n%s%s%nthe job's:%n%s", step, seconds, r.out, r.err,
          context.get()).isTrue();
      return r;
    }

    /** Starts a step in a terminal of its own: a session, every signal at its default, output to a file. */
    Terminal start(String command) throws IOException {
      File output = Files.createTempFile(tmp, "terminal", ".out").toFile();
      List<String> all = List.of("setsid", "env", "--default-signal", "bash", "-euo", "pipefail", "-c", command);
      System.out.println("$ " + command.strip() + "   (in a terminal of its own)");
      return new Terminal(environment(new ProcessBuilder(all)).redirectErrorStream(true).redirectOutput(output).start(),
          output.toPath());
    }

    private ProcessBuilder environment(ProcessBuilder builder) {
      builder.directory(REPO.toFile());
      Map<String, String> env = builder.environment();
      env.put("HOME", home.toString());
      env.put("TMPDIR", tmp.toString());
      env.put("JDK_JAVA_OPTIONS", "-Djava.io.tmpdir=" + tmp);
      env.remove("MAVEN_OPTS");
      env.remove("JAVA_TOOL_OPTIONS");
      env.remove("GEOFENCE_SOURCE_PASSWORD");
      env.putAll(connection);
      return builder;
    }
  }

  private record Result(String step, int status, String out, String err) {

    Result succeeded() {
      assertThat(status).as("exit status of step %s:%n%s%s", step, out, err).isZero();
      return this;
    }
  }

  private static final class Terminal {
    private final Process process;
    private final Path outputFile;
    private final List<ProcessHandle> interrupted = new ArrayList<>();

    Terminal(Process process, Path outputFile) {
      this.process = process;
      this.outputFile = outputFile;
    }

    String output() throws IOException {
      return Files.readString(outputFile, StandardCharsets.UTF_8);
    }

    /** Ctrl-C: SIGINT to the terminal's foreground process group, the shell and both of the job's JVMs. */
    void interrupt() throws Exception {
      interrupted.addAll(process.descendants().toList());
      assertThat(interrupted).as("the job's processes in its terminal").isNotEmpty();
      assertThat(new ProcessBuilder("kill", "-s", "INT", "--", "-" + process.pid()).inheritIO().start().waitFor()).isZero();
    }

    /** Whether the shell and every process it had when interrupted ended within {@code seconds}. */
    boolean awaitExit(int seconds) throws Exception {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      boolean ended = process.waitFor(seconds, TimeUnit.SECONDS);
      for (ProcessHandle p : interrupted) {
        long left = Math.max(0, deadline - System.nanoTime());
        try {
          p.onExit().get(left, TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
          ended = false;
        }
      }
      System.out.println(output());
      return ended;
    }

    void kill() {
      interrupted.forEach(ProcessHandle::destroyForcibly);
      process.descendants().forEach(ProcessHandle::destroyForcibly);
      process.destroyForcibly();
    }
  }
}
