package dev.geofence.job.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class GeofenceCommandTest {

  @Test
  void helpDocumentsEveryRunOption() throws Exception {
    Result r = run("--help");
    assertThat(r.status).isZero();
    for (String option : new String[] {"--source-url", "--source-user", "--fences-table", "--slot", "--locations",
        "--sink-url", "--triggers-topic", "--triggers-transactional-id", "--parallelism", "--checkpoint-dir", "--checkpoint-interval", "--state-backend",
        GeofenceCommand.PASSWORD_ENV}) {
      assertThat(r.out).contains(option);
    }
  }

  @Test
  void helpDocumentsTheReadyCommand() throws Exception {
    Result r = run("ready", "--help");
    assertThat(r.status).isZero();
    assertThat(r.out).contains("java -jar geofence-job.jar ready --rest-url URL [--job NAME]", "--timeout D");
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "run --source-url jdbc:postgresql://h/db --bogus 1 | unknown option --bogus (see --help)",
      "run --source-user u --locations file:/tmp/x | option --source-url is required (see --help)",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations ftp:x | --locations must start with kafka:, file: or generator:, got 'ftp:x'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations kafka:onlyhost | --locations kafka: must be BOOTSTRAP/TOPIC (e.g. kafka:9092/geofence-triggers), got 'onlyhost'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --triggers-topic kafka:9092 | --triggers-topic must be BOOTSTRAP/TOPIC (e.g. kafka:9092/geofence-triggers), got 'kafka:9092'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --triggers-topic k:9092/t --triggers-transactional-id  | option --triggers-transactional-id needs a value",
      "run --source-url mysql://h/db --source-user u --locations file:/x | the fence database URL must look like jdbc:postgresql://host:port/database, got mysql://h/db",
      "run --slot | option --slot needs a value",
      "launch | unknown command 'launch'; the commands are run, demo and ready (see --help)",
      "ready --job geofence | option --rest-url is required (see --help)",
      "ready --rest-url localhost:8081 | option --rest-url must look like http://host:8081, got 'localhost:8081'",
      "ready --rest-url http://localhost:8081 --timeout 0s | option --timeout must be longer than 0",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --state-backend memory | option --state-backend must be hashmap or rocksdb, got 'memory'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --checkpoint-interval soon | option --checkpoint-interval must be a duration like 500ms, 10s, 5m, 1h or 30d, got 'soon'",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --startup later | option --startup must be snapshot or slot, got 'later'",
      "run --source-url jdbc:postgresql://h/db --source-user u --slot bad-name! --locations file:/x | the replication slot 'bad-name!' is not a plain SQL identifier (letters, digits and _, at most 63)",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --checkpoint-interval 1s --heartbeat-interval 5s | option --heartbeat-interval must be shorter than three checkpoint intervals (3000 ms)",
      "run --source-url jdbc:postgresql://h/db --source-user u --locations file:/x --hydration-retention 0ms | the hydration history retention must be at least 1 ms, got 0 ms",
      "ready --rest-url http://localhost:8081 --bogus 1 | unknown option --bogus (see --help)",
  })
  void badCommandLinesFailWithOneSentence(String args, String message) throws Exception {
    Result r = run(args.split(" "));
    assertThat(r.status).isEqualTo(2);
    assertThat(r.err.strip()).isEqualTo("geofence: " + message);
  }

  private static final class Result {
    int status;
    String out;
    String err;
  }

  private static Result run(String... args) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    Result r = new Result();
    r.status = GeofenceCommand.run(args, new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
    r.out = out.toString(StandardCharsets.UTF_8);
    r.err = err.toString(StandardCharsets.UTF_8);
    return r;
  }
}
