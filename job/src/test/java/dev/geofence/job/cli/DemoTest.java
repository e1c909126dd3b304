package dev.geofence.job.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** README's first command, run as a newcomer would (briefly, on ports of its own). */
class DemoTest {

  @TempDir Path dir;

  @Test
  void demoLoadsFencesAndTailsTriggersWhileEditing() throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    int status = GeofenceCommand.run(new String[] {
        "demo", "--fences", "300", "--objects", "50", "--port", "54391", "--rest-port", "18091",
        "--dir", dir.toString(), "--parallelism", "2", "--duration", "25s"}, out, out);
    String output = bytes.toString(StandardCharsets.UTF_8);
    assertThat(status).as(output).isZero();
    assertThat(output)
        .contains("loading fences into PostgreSQL: 100%")
        .contains("psql -h localhost -p 54391 -U postgres")
        .contains("index complete, evaluating locations, fences loaded 100% (300 of 300)")
        .contains("[demo] edit: ")
        .containsPattern("\\n  ENTER object-\\d+ +fence-\\d+ +at ")
        .containsPattern("\\n  EXIT  object-\\d+ +fence-\\d+ +at ");
  }
}
