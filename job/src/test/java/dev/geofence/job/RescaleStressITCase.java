package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.io.WKBWriter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deploys under edits, round after round: the job is stopped with a savepoint and restored at
 * another parallelism (2, 3, 1, 4, 2 and back) while a writer commits fence edits all along, one
 * per transaction, about 20 a second (moves, deletes, re-creations of deleted ids), so that edits
 * fall while the savepoint is taken, while the job is down and while the restored job catches up;
 * objects move meanwhile, on time and in late batches, so that savepoints hold locations and
 * queued edits, and restores split them among other subtasks.
 * Every round must end ready within {@link #READY_BOUND} with the writer still writing, and then,
 * the writer paused, answer as a fresh rebuild and the oracle do (the three-way check).
 *
 * <p>CI runs {@link #DEFAULT_ROUNDS} restores; {@code -Dgeofence.stress.rounds=50} makes it the
 * benchmark-length run (docs/operations.md, "Readiness"), whose per-round times to ready it logs.
 */
class RescaleStressITCase extends EndToEndFixture {

  private static final Logger LOG = LoggerFactory.getLogger(RescaleStressITCase.class);

  /** 2 -> 3 -> 1 -> 4 -> 2, then back the other way, over and over. */
  private static final int[] PARALLELISMS = {2, 3, 1, 4, 2, 4, 1, 3};
  static final int DEFAULT_ROUNDS = 4;
  /** How long a restored job may take to be ready under the writer's edits, on a loaded two-core machine. */
  static final Duration READY_BOUND = Duration.ofSeconds(60);
  private static final int STRESS_FENCES = 80;
  private static final long EDIT_PAUSE_MS = 40;
  private static final int WALKERS = 20;

  @Test
  void everyRestoreUnderEditsEndsReadyAndAsTheOracle() throws Exception {
    int rounds = Integer.getInteger("geofence.stress.rounds", DEFAULT_ROUNDS);
    database("rescale_stress", 32);
    Writer writer = new Writer(url, new SplittableRandom(7));
    for (int i = 0; i < STRESS_FENCES; i++) {
      writer.create("stress-" + i);
    }
    fences.putAll(writer.shapes);
    JobClient job = start(PARALLELISMS[0], "rocksdb");
    List<String> times = new ArrayList<>();
    for (int round = 1; round <= rounds; round++) {
      int parallelism = PARALLELISMS[round % PARALLELISMS.length];
      String backend = round % 3 == 0 ? "hashmap" : "rocksdb";
      writer.start();
      // Edits while the job streams, while the savepoint is taken and while the job is down.
      Thread.sleep(500);
      String savepoint = stopWithSavepoint(job);
      Thread.sleep(300);
      long launched = System.currentTimeMillis();
      job = launch(parallelism, backend, savepoint);
      // Ready while the writer goes on: every subtask's episode of this job says when.
      JobClient restored = job;
      List<Episode> ready = Waiting.until("every subtask of round " + round + " (parallelism " + parallelism + ", " + backend
          + ") to be ready under edits", READY_BOUND, () -> episodes(restored),
          rows -> rows.size() == parallelism && rows.stream().allMatch(e -> e.hydratedAt() != 0));
      long slowest = ready.stream().mapToLong(e -> e.hydratedAt() - e.installedAt()).max().orElseThrow();
      writer.stop();
      fences.putAll(writer.shapes);
      times.add(String.format("round %d: parallelism %d, %s, %d edits so far, ready %d ms after launch (slowest subtask %d ms"
          + " after its start)", round, parallelism, backend, writer.edits, ready.stream().mapToLong(Episode::hydratedAt).max()
          .orElseThrow() - launched, slowest));
      LOG.info("{}", times.get(times.size() - 1));
      assertThat(ready).as("round %d's episodes", round).allSatisfy(e -> {
        assertThat(e.startMode()).isEqualTo("savepoint");
        assertThat(e.checksumMatch()).isTrue();
      });
      // The stream alone edits the fences here: a bucket re-read from the source means the job lost
      // or doubled an edit, which the heal would hide.
      assertThat(episodes(restored)).as("re-reads in round %d", round)
          .noneMatch(e -> e.startMode().equals("rebuild") || e.bucketsReread() > 0);
      awaitEvaluated();
      threeWayCheck("round-" + round, 5_000);
    }
    LOG.info("{} restores under edits:\n{}", rounds, String.join("\n", times));
    assertThat(writer.edits).as("edits the writer committed").isGreaterThan(rounds * 10L);
  }

  /**
   * Commits fence edits on a connection of its own, one per transaction, about every {@link
   * #EDIT_PAUSE_MS}: moves a live fence, deletes one, or re-creates a deleted id. Its shapes are
   * the oracle's once it is stopped.
   */
  private final class Writer {
    final Map<String, Geometry> shapes = new HashMap<>();
    private final String url;
    private final SplittableRandom random;
    private final AtomicReference<Exception> failure = new AtomicReference<>();
    private volatile boolean running;
    private Thread thread;
    private Connection db;
    long edits;

    Writer(String url, SplittableRandom random) throws Exception {
      this.url = url;
      this.random = random;
      this.db = DriverManager.getConnection(url, "postgres", "");
    }

    void start() {
      running = true;
      thread = new Thread(() -> {
        try {
          for (int i = 0; running; i++) {
            editOnce();
            if (i % 4 == 0) {
              move(0);
            }
            if (i % 25 == 0) {
              move(1_000 + random.nextInt(10_000));
            }
            Thread.sleep(EDIT_PAUSE_MS);
          }
        } catch (Exception e) {
          failure.set(e);
        }
      }, "fence-writer");
      thread.start();
    }

    void stop() throws Exception {
      running = false;
      thread.join();
      if (failure.get() != null) {
        throw new AssertionError("the writer failed", failure.get());
      }
    }

    private void editOnce() throws Exception {
      List<String> live = new ArrayList<>();
      List<String> deleted = new ArrayList<>();
      shapes.forEach((id, shape) -> (shape == null ? deleted : live).add(id));
      live.sort(null);
      deleted.sort(null);
      int kind = random.nextInt(4);
      if (kind == 0 && live.size() > STRESS_FENCES / 2) {
        delete(live.get(random.nextInt(live.size())));
      } else if (kind == 1 && !deleted.isEmpty()) {
        create(deleted.get(random.nextInt(deleted.size())));
      } else {
        create(live.get(random.nextInt(live.size())));
      }
      edits++;
    }

    /** Every walker one step, stamped {@code lateBy} behind the wall clock (late within the allowed lateness). */
    private void move(long lateBy) throws Exception {
      long t = System.currentTimeMillis() + 50 - lateBy;
      List<String> lines = new ArrayList<>();
      for (int o = 0; o < WALKERS; o++) {
        lines.add(LocationJson.format(new Location((lateBy == 0 ? "walker-" : "late-walker-") + o, t + o,
            random.nextDouble(-0.5, 10.5), random.nextDouble(-0.5, 10.5), null)));
      }
      writeLines(lines);
    }

    void create(String id) throws Exception {
      Geometry shape = GeneratedFences.star(random, random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5),
          6 + random.nextInt(30));
      try (PreparedStatement s = db.prepareStatement(
          "INSERT INTO fences (id, geom) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET geom = excluded.geom")) {
        s.setString(1, id);
        s.setBytes(2, new WKBWriter().write(shape));
        s.execute();
      }
      shapes.put(id, shape);
    }

    void delete(String id) throws Exception {
      try (PreparedStatement s = db.prepareStatement("DELETE FROM fences WHERE id = ?")) {
        s.setString(1, id);
        s.execute();
      }
      shapes.put(id, null);
    }
  }
}
