package dev.geofence.savepoints;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The savepoint tools' command line: help, and a bad command line in one sentence with exit 2. */
class SavepointCommandTest {

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "--help | 0 | Usage: java -jar geofence-savepoints.jar inspect SAVEPOINT",
      "shrink x | 2 | geofence-savepoints: unknown command 'shrink'; the commands are inspect, verify, bootstrap, export and in-use (see --help)",
      "inspect | 2 | geofence-savepoints: the savepoint's path is required after 'inspect'",
      "inspect --json | 2 | geofence-savepoints: the savepoint's path is required after 'inspect'",
      "verify /tmp/sp --source-user u | 2 | geofence-savepoints: option --source-url (geofence.source.url) is required",
      "verify /tmp/sp --source-user u -Dgeofence.verify.limt=3 | 2 | geofence-savepoints: unknown option geofence.verify.limt",
      "verify /tmp/sp --source-url jdbc:postgresql://h/db --source-user u --limit many | 2 | geofence-savepoints: option --limit (geofence.verify.limit) must be a whole number, got 'many'",
      "inspect /tmp/sp --parallelism --json | 2 | geofence-savepoints: option --parallelism needs a value",
      "export /tmp/sp | 2 | geofence-savepoints: option --to-arrow (geofence.export.to-arrow) is required",
      "in-use /tmp/sp --job-id 0123 | 2 | geofence-savepoints: option --checkpoint-dir (execution.checkpointing.dir) is required",
      "in-use /tmp/sp --checkpoint-dir file:///tmp/cp | 2 | geofence-savepoints: option --job-id (geofence.in-use.job-id) is required",
      "bootstrap --from-arrow /tmp/f.arrow | 2 | geofence-savepoints: option --output (geofence.bootstrap.output) is required",
      "bootstrap --output /tmp/x --geometry-format svg --source-url jdbc:postgresql://h/db --source-user u | 2 | geofence-savepoints: option --geometry-format (geofence.source.geometry-format) must be wkb, wkt or geojson, got 'svg'",
      "bootstrap --output /tmp/x --id-column fence-id --source-url jdbc:postgresql://h/db --source-user u | 2 | geofence-savepoints: the id column 'fence-id' is not a plain SQL identifier",
  })
  void commandLines(String args, int status, String firstLine) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    assertThat(SavepointCommand.run(args.split(" "), out, out)).isEqualTo(status);
    assertThat(bytes.toString(StandardCharsets.UTF_8)).startsWith(firstLine);
  }
}
