package dev.geofence.job.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The demo's own run, ended by {@code --duration} rather than a signal (FirstContactITCase runs
 * README's demo command as a user does, from the jar, and stops it with signals).
 */
class DemoTest {

  @TempDir Path dir;

  @Test
  void demoLoadsFencesAndTailsTriggersWhileEditing() throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    // Free ports, not fixed ones: another suite on this machine may be running its demo too.
    int pgPort = freePort();
    int restPort = freePort();
    int status = GeofenceCommand.run(new String[] {
        "demo", "--fences", "300", "--objects", "50", "--port", Integer.toString(pgPort), "--rest-port", Integer.toString(restPort),
        "--dir", dir.toString(), "--parallelism", "2", "--duration", "25s"}, out, out);
    String output = bytes.toString(StandardCharsets.UTF_8);
    assertThat(status).as(output).isZero();
    assertThat(output)
        .contains("loading fences into PostgreSQL: 100%")
        .contains("psql -h localhost -p " + pgPort + " -U postgres")
        .contains("[demo] index ready: 2 of 2 subtasks, 300 fences; evaluating locations")
        .contains("[demo] edit: ")
        .contains("[demo] stopping the job with a savepoint", "[demo] PostgreSQL stopped")
        .containsPattern("\\n  ENTER object-\\d+ +fence-\\d+ +at ")
        .containsPattern("\\n  EXIT  object-\\d+ +fence-\\d+ +at ");
    Path savepoint = Demo.newestSavepoint(dir.resolve("savepoints"));
    assertThat(savepoint).as("the savepoint a next demo restores from").isNotNull();
    long now = System.currentTimeMillis();
    assertThat(Demo.timelineStart(dir, savepoint, now)).as("the timeline kept for the restored run")
        .isNotNull().isBetween(now - 120_000, now);
  }

  /**
   * A restored run's timeline is the run's that took the savepoint, moved on by the time since,
   * and only for that savepoint: one taken by another run, or none recorded, has no timeline.
   */
  @Test
  void theTimelineKeptWithASavepointMovesOnByTheTimeSinceItWasTaken() throws Exception {
    Path savepoint = dir.resolve("savepoints").resolve("savepoint-4a2b-0123456789ab");
    assertThat(Demo.timelineStart(dir, savepoint, 5_000_000)).isNull();
    Demo.keepTimeline(dir, savepoint, 1_000_000, 1_060_000);
    assertThat(Demo.timelineStart(dir, savepoint, 1_090_000)).isEqualTo(1_030_000);
    assertThat(Demo.timelineStart(dir, dir.resolve("savepoints").resolve("savepoint-4a2b-ba9876543210"), 1_090_000)).isNull();
    Demo.keepTimeline(dir, savepoint, 1_030_000, 1_100_000);
    assertThat(Demo.timelineStart(dir, savepoint, 1_100_500)).isEqualTo(1_030_500);
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }
}
