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
      "shrink x | 2 | geofence-savepoints: unknown command 'shrink'; the commands are inspect, verify, bootstrap and export (see --help)",
      "inspect | 2 | geofence-savepoints: the savepoint's path is required after 'inspect'",
      "inspect --json | 2 | geofence-savepoints: the savepoint's path is required after 'inspect'",
      "verify /tmp/sp --source-user u | 2 | geofence-savepoints: option --source-url is required",
      "export /tmp/sp | 2 | geofence-savepoints: option --to-arrow is required",
      "bootstrap --from-arrow /tmp/f.arrow | 2 | geofence-savepoints: option --output is required",
      "bootstrap --output /tmp/x --geometry-format svg --source-url jdbc:postgresql://h/db --source-user u | 2 | geofence-savepoints: option --geometry-format must be wkb, wkt or geojson, got 'svg'",
  })
  void commandLines(String args, int status, String firstLine) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    assertThat(SavepointCommand.run(args.split(" "), out, out)).isEqualTo(status);
    assertThat(bytes.toString(StandardCharsets.UTF_8)).startsWith(firstLine);
  }
}
