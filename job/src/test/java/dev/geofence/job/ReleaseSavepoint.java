package dev.geofence.job;

import dev.geofence.job.testing.EndToEndFixture;
import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Statement;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;

/**
 * Savepoints of a release, kept in the test resources so that every later release proves it
 * restores them ({@code EarlierReleaseSavepointITCase}): one history of fences, edits and moving
 * objects ({@link #history}), run through the job and stopped with a canonical savepoint (RocksDB
 * under the changelog, as the job runs by default) and a native one (RocksDB alone), with edits
 * made just before each stop, so that the savepoint holds edits still queued for the clock,
 * objects inside fences and superseded versions.
 *
 * <p>Written by hand, once per release whose state layout changed, from that release's code:
 * {@code mvn -pl job -am test-compile} and then, in {@code job/}, {@code java -cp
 * "target/test-classes:target/classes:$(mvn -q dependency:build-classpath -Dmdep.outputFile=/dev/stdout)"
 * dev.geofence.job.ReleaseSavepoint src/test/resources/savepoints/NAME}. The restore test replays
 * the same history on a fresh database (without a job), so that its fences, seqs and bucket
 * versions are the savepoint's.
 */
class ReleaseSavepoint extends EndToEndFixture {

  static final String DATABASE = "release_savepoint";
  static final long SEED = 51;
  static final int PARALLELISM = 2;
  /** The formats written, each under the backend it is taken from: the directory name, the backend, the format. */
  static final String[][] FORMATS = {{"canonical", "rocksdb", "CANONICAL"}, {"native", "rocksdb-plain", "NATIVE"}};

  /**
   * The history, through the job when {@code job} is given (it is started at {@link #PARALLELISM}
   * and checked against the oracle on the way), else replayed on the database and the oracle alone.
   * Returns the job, still running, with edits made just before the caller stops it.
   */
  JobClient history(String backend, boolean withJob) throws Exception {
    database(DATABASE, SEED);
    placeFences(0, 30);
    JobClient job = null;
    if (withJob) {
      job = start(PARALLELISM, backend);
    } else {
      runsAt(PARALLELISM);
      writeSentinel();
    }
    moveObjects();
    checked(withJob);
    placeFences(5, 10);
    deleteFences(10, 12);
    createFences(30, 33);
    moveObjects();
    checked(withJob);
    // Just before the stop: edits queued for the clock when the savepoint is taken. With the
    // heartbeat table out of the publication, the fence stream's watermark stays before the last
    // of them (no delete among them: whether its EXITs were written before the savepoint or after
    // the restore would depend on timing). Seconds pass, so that the job has them before the stop.
    try (Statement s = db.createStatement()) {
      s.execute("ALTER PUBLICATION geofence_publication DROP TABLE fence_heartbeat");
    }
    Thread.sleep(3_000);
    placeFences(0, 2);
    createFences(33, 34);
    Thread.sleep(2_000);
    return job;
  }

  /** The job's triggers checked against the oracle, or, replaying without a job, the sentinel that check writes. */
  private void checked(boolean withJob) throws Exception {
    if (withJob) {
      assertTriggersAsOracle();
    } else {
      writeSentinel();
    }
  }

  /** Puts the heartbeat table back into the publication, as {@link #history} left it out. */
  void heartbeatsStreamedAgain() throws Exception {
    try (Statement s = db.createStatement()) {
      s.execute("ALTER PUBLICATION geofence_publication ADD TABLE fence_heartbeat");
    }
  }

  /** Writes the release's savepoints under {@code args[0]}. */
  public static void main(String[] args) throws Exception {
    Path out = Path.of(args[0]).toAbsolutePath();
    postgres = replicationServer().start();
    try {
      for (String[] format : FORMATS) {
        ReleaseSavepoint writer = new ReleaseSavepoint();
        writer.temp = Files.createTempDirectory("release-savepoint");
        JobClient job = writer.history(format[1], true);
        String savepoint = job.stopWithSavepoint(false, writer.temp.resolve("savepoints").toUri().toString(),
            SavepointFormatType.valueOf(format[2])).get();
        long lsn = writer.queryLong("SELECT pg_current_wal_lsn() - '0/0'");
        writer.heartbeatsStreamedAgain();
        Path target = out.resolve(format[0]);
        copy(Path.of(URI.create(savepoint)), target);
        Properties written = new Properties();
        written.setProperty("backend", format[1]);
        written.setProperty("wal-lsn", Long.toString(lsn));
        try (Writer w = Files.newBufferedWriter(out.resolve(format[0] + ".properties"))) {
          written.store(w, "the state backend the savepoint was taken from, and the source's WAL position then");
        }
        writer.db.close(); // the job has stopped, and its cluster with it
        System.out.println("wrote " + target);
      }
    } finally {
      postgres.close();
    }
  }

  /** What {@link #main} wrote beside a savepoint: its backend and the source's WAL position at the stop. */
  static Properties written(Path savepoints, String format) throws IOException {
    Properties written = new Properties();
    try (Reader r = Files.newBufferedReader(savepoints.resolve(format + ".properties"))) {
      written.load(r);
    }
    return written;
  }

  static void copy(Path from, Path to) throws IOException {
    try (Stream<Path> files = Files.walk(from)) {
      for (Path file : (Iterable<Path>) files::iterator) {
        Path target = to.resolve(from.relativize(file).toString());
        if (Files.isDirectory(file)) {
          Files.createDirectories(target);
        } else {
          Files.copy(file, target, StandardCopyOption.REPLACE_EXISTING);
        }
      }
    }
  }
}
