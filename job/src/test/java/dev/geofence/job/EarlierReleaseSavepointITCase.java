package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every savepoint an earlier release wrote ({@link ReleaseSavepoint}, kept under {@code
 * src/test/resources/savepoints/}) restores into this release: its history is replayed on a fresh
 * database without a job (the same fences, seqs and bucket versions; the source's WAL then moved
 * past the savepoint's, as a source that went on writing), and the savepoint, restored at another
 * parallelism, is proven covered by the bucket versions rather than rebuilt, catches up on the edits
 * it held queued, and ends as the oracle: triggers of the objects moving after it, and the three-way
 * check.
 */
class EarlierReleaseSavepointITCase extends ReleaseSavepoint {

  private static final Path RELEASES = Path.of("src/test/resources/savepoints");

  static Stream<String[]> savepoints() throws Exception {
    List<Path> releases;
    try (Stream<Path> dirs = Files.list(RELEASES)) {
      releases = dirs.filter(Files::isDirectory).sorted().toList();
    }
    assertThat(releases).as("releases with savepoints under %s", RELEASES).isNotEmpty();
    return releases.stream().flatMap(release -> Stream.of(ReleaseSavepoint.FORMATS)
        .map(format -> new String[] {release.getFileName().toString(), format[0]}));
  }

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("savepoints")
  void anEarlierReleasesSavepointRestoresAndEndsAsTheOracle(String release, String format) throws Exception {
    Path written = RELEASES.resolve(release);
    Properties taken = ReleaseSavepoint.written(written, format);
    // Its history replayed on this test's database and oracle; the triggers of then are in no table here.
    history(taken.getProperty("backend"), false);
    heartbeatsStreamedAgain();
    expected.clear();
    // The replay's location files stay behind: the restored job reads a new inbox.
    inbox = Files.createDirectories(temp.resolve("inbox-after-restore"));
    // The source went on writing after the savepoint: its slot, made now, is past it.
    long lsn = Long.parseLong(taken.getProperty("wal-lsn"));
    while (queryLong("SELECT pg_current_wal_lsn() - '0/0'") <= lsn) {
      queryLong("SELECT pg_logical_emit_message(false, 'filler', repeat('x', 4000000)) - '0/0'");
    }
    queryLong("SELECT count(*) FROM pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");

    Path savepoint = temp.resolve("restored-" + format);
    ReleaseSavepoint.copy(written.resolve(format), savepoint);
    JobClient job = start(3, taken.getProperty("backend"), savepoint.toUri().toString());
    moveObjects();
    assertTriggersAsOracle();
    List<Episode> warmUps = assertWarmUps(job, 3, "savepoint");
    assertThat(warmUps).as("restored, not rebuilt").allSatisfy(e -> {
      assertThat(e.gapCheck()).isEqualTo("covered");
      assertThat(e.gapReason()).contains("proven by the bucket versions");
      assertThat(e.bucketsReread()).isZero();
    });
    placeFences(0, 5);
    deleteFences(20, 22);
    moveObjects();
    assertTriggersAsOracle();
    threeWayCheck("release-" + release + "-" + format, 20_000);
  }
}
