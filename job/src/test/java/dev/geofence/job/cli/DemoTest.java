package dev.geofence.job.cli;

import dev.geofence.job.operator.Uids;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.job.operator.SavepointFiles;
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
        "--dir", dir.toString(), "--parallelism", "2", "--duration", "40s"}, out, out);
    String output = bytes.toString(StandardCharsets.UTF_8);
    assertThat(status).as(output).isZero();
    assertThat(output)
        .contains("loading fences into PostgreSQL: 100%")
        .contains("psql -h localhost -p " + pgPort + " -U postgres")
        .contains("[demo] index ready: 2 of 2 subtasks, 300 fences; evaluating locations")
        .contains("[demo] edit: ")
        .contains("[demo] stopping the job with a savepoint", "[demo] PostgreSQL stopped")
        .containsPattern("\\n  ENTER object-\\d+ +fence-\\d+ +at ")
        .containsPattern("\\n  EXIT  object-\\d+ +fence-\\d+ +at ")
        // The first parking objects park in their depots (which have a delay of their own), the first
        // silent ones fall silent in their yards, all at once: which of them the tail shows first varies.
        .containsPattern("\\n  DWELL object-(\\d*3) +depot-\\1 +at .* \\(inside for 5 s\\)")
        .containsPattern("\\n  EXIT  object-\\d*7 +\\S+ +at .* \\(silent for 15 s\\)");
    Path savepoint = Demo.newestSavepoint(dir.resolve("savepoints"));
    assertThat(savepoint).as("the savepoint a next demo restores from").isNotNull();
    // The generator's position in it, from which the next run stamps on the wall clock.
    long position = GeofenceCommand.generatorPosition(
        SavepointFiles.readerSplits(SavepointFiles.check(savepoint.toString()), Uids.LOCATION_SOURCE));
    assertThat(position).as("locations the first run's generator emitted").isGreaterThan(50L * 10);
    long now = System.currentTimeMillis();
    MovingObjects.Lines restored = GeofenceCommand.generator("50", now, position);
    assertThat(restored.objects().location(position).timestamp).isEqualTo(now);
    assertThat(restored.objects().location(position).lon).isEqualTo(new MovingObjects(50, 0, 0, 10, 10, 0, 1000).location(position).lon);
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }
}
