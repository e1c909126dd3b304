package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeSet;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.Point;
import org.slf4j.LoggerFactory;

/**
 * The time rules of docs/semantics.md#time-rules end to end, against an oracle of time: generated
 * phases of fence inserts, reshapes and deletes, objects moving on time, late batches within the
 * allowed lateness, locations beyond it, out of order for their object and from the future, through
 * the real job and a real PostgreSQL with {@code track_commit_timestamp = on}, so that the oracle
 * knows the commit time of every edit, which is the time the job sees it at. The oracle evaluates
 * each location with JTS against the fence versions in force at its time and keeps each object's
 * presence in its own event time, by the rules alone; {@code geofence_triggers} and the locations'
 * dead letters must equal it exactly. The job starts at parallelism 1, is stopped with a savepoint
 * in the middle and restored at parallelism 3, and the late locations after the restore need the
 * fence history of before it. With a loitering delay and a presence timeout set, the oracle keeps
 * each stay's ENTER time: a stay that lasts the delay of the fence version of its ENTER (the fence's
 * own, from the fences table's {@code dwell_delay} column, set when a fence is created and kept by
 * its reshapes; else the job's) DWELLs at its ENTER + delay, and an object
 * with no location for the timeout EXITs its fences at its last location + timeout (docs/semantics.md);
 * at the end the clock is moved past every object's silence by the lateness, so every stay ends.
 *
 * <p>Each phase is made so that the job's order is determined: edits wait until the database
 * clock has passed every location so far; the locations of a messy file are evaluated at once or
 * held (never before an edit they precede: no edit is made until the file is evaluated), and a
 * sentinel at the end of the file, in the same reader's order, says when every subtask has.
 */
class EventTimeOracleITCase extends EndToEndFixture {

  private static final Duration LATENESS = Duration.ofSeconds(30);
  /** How far back late batches reach: well within the lateness, whatever the clock's lag. */
  private static final long LATE_WINDOW_MS = 22_000;
  private static final int WALKERS = 30;
  private static final int LATE_OBJECTS = 15;
  private static final long DELAY = 2_000;
  private static final long TIMEOUT = 8_000;

  /**
   * One version of a fence in the oracle's timeline: from its commit time on (MIN_VALUE: since
   * ever), null when deleted; with the delay a stay that begins in it DWELLs after, its own or the
   * job's (0: never).
   */
  private record Version(long from, Geometry shape, long delay) {}

  private final Map<String, List<Version>> timelines = new HashMap<>();
  private final SplittableRandom delays = new SplittableRandom(38);
  /** Each object's open stays: fence to DWELL time (ENTER + the delay of the version of then; MAX_VALUE: never). */
  private final Map<String, Map<String, Long>> stays = new HashMap<>();
  /** The open stays ("object fence") in a fence version with a delay of its own other than the job's. */
  private final Set<String> ownDelayStays = new HashSet<>();
  /** Each open stay's ENTER time. */
  private final Map<String, Long> enters = new HashMap<>();
  /** DWELLs by a fence's own delay, and looks at stays in fences that never DWELL once they had lasted the job's delay. */
  private int ownDelayDwells;
  private int neverPastTheJobsDelay;
  /** The open stays ("object fence") that have DWELLed. */
  private final Set<String> dwelled = new HashSet<>();
  private final Map<String, Long> newest = new HashMap<>();
  private final Set<String> expectedTriggers = new TreeSet<>();
  private final Set<String> expectedLetters = new TreeSet<>();
  private int fenceIds;
  private int lateSentinels;
  private int strays;
  /** The fixture's last sentinel object, inside every sentinel fence. */
  private String lastSentinel;
  /** Late locations whose answer differs from what the current fences would have given. */
  private int historicAnswers;
  /** EXITs written as caused by a reshape. */
  private int reshaped;

  @Test
  void triggersAndDeadLettersAreTheOraclesOfTimeAcrossARestore() throws Exception {
    database("event_time_oracle", 16);
    timePolicy = new LocationTimePolicy(LATENESS, Duration.ofSeconds(30));
    stayRules = new StayRules(Duration.ofMillis(DELAY), Duration.ofMillis(TIMEOUT));
    for (int i = 0; i < 10; i++) {
      createFence(Long.MIN_VALUE);
    }
    JobClient first = start(1, "hashmap");
    for (int phase = 0; phase < 2; phase++) {
      phase();
    }
    // Edits just before the stop: the late batches after the restore fall before them.
    edits();
    String savepoint = stopWithSavepoint(first);
    start(3, "rocksdb", savepoint);
    runsAt(3);
    lastSentinel = awaitEvaluated();
    messyFile();
    for (int phase = 0; phase < 2; phase++) {
      phase();
    }

    awaitEvaluated();
    // Every object falls silent: once the clock is past the last silence by the lateness, every stay has ended.
    long lastSilence = newest.values().stream().mapToLong(t -> t + TIMEOUT).max().orElseThrow();
    Waiting.until("the database clock past the last silence by the lateness", PATIENCE,
        () -> databaseMillis() > lastSilence + LATENESS.toMillis() + 2_000);
    awaitEvaluated();
    for (String object : new ArrayList<>(stays.keySet())) {
      silence(object, newest.get(object) + TIMEOUT);
    }
    Set<String> written = eventually(() -> {
      Set<String> rows = new TreeSet<>();
      for (String row : triggersWithCauses()) {
        if (!row.startsWith("sentinel-") && !row.startsWith("late-sentinel-")) {
          rows.add(row);
        }
      }
      return rows;
    }, expectedTriggers);
    assertThat(written).as("geofence_triggers, against the oracle of time").isEqualTo(expectedTriggers);
    assertThat(queryLong("SELECT count(*) FROM geofence_triggers WHERE object_id NOT LIKE '%sentinel-%'"))
        .as("no trigger written twice").isEqualTo(expectedTriggers.size());
    assertThat(locationDeadLetters()).as("the locations' dead letters").isEqualTo(expectedLetters);
    assertThat(expectedLetters).as("every rule was exercised")
        .anyMatch(l -> l.contains(" LATE ")).anyMatch(l -> l.contains(" OUT_OF_ORDER ")).anyMatch(l -> l.contains(" FUTURE_TIMESTAMP "));
    assertThat(historicAnswers).as("locations whose answer the superseded versions decided").isPositive();
    // Deletes EXIT whoever the random walk left inside, often nobody: not required here.
    assertThat(expectedTriggers).as("DWELL, silence and locations' EXITs exercised").anyMatch(t -> t.contains(" DWELL loitering "))
        .anyMatch(t -> t.contains(" EXIT silence ")).anyMatch(t -> t.contains(" EXIT location "));
    assertThat(ownDelayDwells).as("DWELLs by a fence's own delay").isPositive();
    assertThat(neverPastTheJobsDelay).as("stays in fences that never DWELL, past the job's delay").isPositive();
    LoggerFactory.getLogger(EventTimeOracleITCase.class).info(
        "{} triggers and {} dead letters as the oracle's; {} answers of superseded versions; {} EXITs caused by a reshape;"
        + " {} DWELLs by a fence's own delay; {} stays in fences that never DWELL, past the job's delay",
        expectedTriggers.size(), expectedLetters.size(), historicAnswers, reshaped, ownDelayDwells, neverPastTheJobsDelay);
  }

  /** Edits, then objects moving on time, then a messy file. */
  private void phase() throws Exception {
    edits();
    List<Location> moves = new ArrayList<>();
    long t = nextLocationTime();
    for (int step = 0; step < 2; step++) {
      for (int o = 0; o < WALKERS; o++) {
        moves.add(new Location("walker-" + o, t + step * 20 + o, random.nextDouble(-0.5, 10.5), random.nextDouble(-0.5, 10.5), null));
      }
    }
    write(moves);
    for (Location l : moves) {
      evaluate(l);
    }
    lastSentinel = awaitEvaluated();
    messyFile();
  }

  /** Three random edits: a creation, a reshape, a delete or a re-creation. */
  private void edits() throws Exception {
    for (int e = 0; e < 3; e++) {
      List<String> live = timelines.keySet().stream().filter(id -> current(id) != null).sorted().toList();
      List<String> deleted = timelines.keySet().stream().filter(id -> current(id) == null).sorted().toList();
      int kind = random.nextInt(4);
      if (kind == 0 || live.size() < 4) {
        createFence(0);
      } else if (kind == 1 && !deleted.isEmpty()) {
        String id = deleted.get(random.nextInt(deleted.size()));
        Long own = ownDelay();
        upsertFence(id, shape(), own);
        record(id, fences.get(id), commitTime("fences", id), own);
      } else if (kind == 2) {
        // A reshape keeps the fence's delay: only the geometry is updated.
        String id = live.get(random.nextInt(live.size()));
        upsertFence(id, shape());
        List<Version> timeline = timelines.get(id);
        timeline.add(new Version(commitTime("fences", id), fences.get(id), timeline.get(timeline.size() - 1).delay()));
      } else {
        String id = live.get(random.nextInt(live.size()));
        deleteFence(id);
        long at = commitTime("fence_tombstones", id);
        timelines.get(id).add(new Version(at, null, 0));
        // The delete EXITs every object inside, at once; one silent since before it by the silence,
        // then: that stay alone, the object's others are decided on their own.
        for (String object : new ArrayList<>(stays.keySet())) {
          if (stays.get(object).containsKey(id)) {
            if (at > newest.get(object) + TIMEOUT) {
              long silentAt = newest.get(object) + TIMEOUT;
              dwellIfDue(object, id, silentAt);
              expectedTriggers.add(object + " " + id + " EXIT silence " + silentAt);
              endStay(object, id);
            } else {
              dwellIfDue(object, id, at);
              expectedTriggers.add(object + " " + id + " EXIT fence-deleted");
              endStay(object, id);
            }
          }
        }
      }
    }
  }

  private void createFence(long since) throws Exception {
    String id = "fence-" + fenceIds++;
    Long own = ownDelay();
    upsertFence(id, shape(), own);
    record(id, fences.get(id), since == Long.MIN_VALUE ? Long.MIN_VALUE : commitTime("fences", id), own);
  }

  /**
   * A fence's own dwell delay in milliseconds, or null (the job's): most have none, some never
   * DWELL, some sooner or later than the job's. Drawn from a generator of their own, so that the
   * fixture's draws (shapes, edits, locations) are those of the runs before delays.
   */
  private Long ownDelay() {
    int pick = delays.nextInt(5);
    return pick < 2 ? null : pick == 2 ? 0L : pick == 3 ? 700L : 3_500L;
  }

  private Geometry shape() {
    return GeneratedFences.star(random, random.nextDouble(10), random.nextDouble(10), 1 + random.nextDouble(2), 6 + random.nextInt(30));
  }

  private void record(String id, Geometry shape, long from, Long ownDelay) {
    timelines.computeIfAbsent(id, k -> new ArrayList<>()).add(new Version(from, shape, ownDelay == null ? DELAY : ownDelay));
  }

  /** The commit time of the row's last write, in milliseconds as the change stream carries it. */
  private long commitTime(String table, String id) throws Exception {
    try (PreparedStatement s = db.prepareStatement(
        "SELECT floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)::bigint FROM " + table + " WHERE id = ?")) {
      s.setString(1, id);
      try (ResultSet r = s.executeQuery()) {
        assertThat(r.next()).as("a row of %s in %s", id, table).isTrue();
        return r.getLong(1);
      }
    }
  }

  /**
   * One file of what real fleets send: late batches within the lateness, locations out of order
   * for their object, beyond the lateness, from the future; then a sentinel, and the wait until
   * every subtask has evaluated it.
   */
  private void messyFile() throws Exception {
    long now = databaseMillis();
    List<String> lines = new ArrayList<>();
    List<Runnable> oracle = new ArrayList<>();
    for (int o = 0; o < LATE_OBJECTS; o++) {
      String object = "late-" + o;
      long from = Math.max(newest.getOrDefault(object, Long.MIN_VALUE) + 1, now - LATE_WINDOW_MS);
      long to = now - 500;
      if (from >= to) {
        continue;
      }
      List<Long> times = new ArrayList<>();
      for (int k = 0; k < 3; k++) {
        times.add(random.nextLong(from, to));
      }
      times.sort(null);
      for (long t : times) {
        Location l = new Location(object, t, random.nextDouble(-0.5, 10.5), random.nextDouble(-0.5, 10.5), null);
        lines.add(LocationJson.format(l));
        oracle.add(() -> evaluate(l));
      }
    }
    for (int o = 0; o < 4; o++) {
      String object = "walker-" + random.nextInt(WALKERS);
      Location l = new Location(object, newest.get(object) - 1 - random.nextInt(2000), random.nextDouble(10), random.nextDouble(10), null);
      lines.add(LocationJson.format(l));
      oracle.add(() -> evaluate(l));
    }
    for (int o = 0; o < 2; o++) {
      Location tooLate = new Location("stray-" + strays++, now - LATENESS.toMillis() - 90_000, 5, 5, null);
      lines.add(LocationJson.format(tooLate));
      oracle.add(() -> expectedLetters.add(tooLate.objectId + " LATE " + tooLate.timestamp));
      Location future = new Location("walker-" + random.nextInt(WALKERS), now + 3_600_000 + random.nextInt(1000), 5, 5, null);
      lines.add(LocationJson.format(future));
      oracle.add(() -> expectedLetters.add(future.objectId + " FUTURE_TIMESTAMP " + future.timestamp));
    }
    String sentinel = "late-sentinel-" + lateSentinels++;
    long sentinelFences = queryLong("SELECT count(*) FROM geofence_presence WHERE object_id = '" + lastSentinel + "'");
    lines.add(LocationJson.format(new Location(sentinel, now - 300, 100.5, 50.5, null)));
    writeLines(lines);
    oracle.forEach(Runnable::run);
    Waiting.until("every subtask to evaluate the messy file up to " + sentinel, PATIENCE,
        () -> queryLong("SELECT count(*) FROM geofence_triggers WHERE object_id = '" + sentinel + "'") == sentinelFences);
  }

  /**
   * The rules: a location older than its object's newest is out of order; else it is evaluated
   * against the version of each fence in force at its time, a fence deleted since left as it is.
   */
  private void evaluate(Location l) {
    Long last = newest.get(l.objectId);
    if (last != null && l.timestamp < last) {
      expectedLetters.add(l.objectId + " OUT_OF_ORDER " + l.timestamp);
      return;
    }
    if (last != null && stays.containsKey(l.objectId) && l.timestamp > last + TIMEOUT) {
      silence(l.objectId, last + TIMEOUT);
    }
    newest.put(l.objectId, l.timestamp);
    Point point = JTS.createPoint(new Coordinate(l.lon, l.lat));
    Set<String> before = new HashSet<>(stays.getOrDefault(l.objectId, Map.of()).keySet());
    Set<String> now = new HashSet<>();
    Map<String, Long> dueIfEntered = new HashMap<>();
    for (Map.Entry<String, List<Version>> e : timelines.entrySet()) {
      String id = e.getKey();
      boolean deletedSince = e.getValue().stream().anyMatch(v -> v.from() > l.timestamp && v.shape() == null);
      if (deletedSince) {
        if (before.contains(id)) {
          now.add(id);
        }
        continue;
      }
      if (before.contains(id)) {
        dwellIfDue(l.objectId, id, l.timestamp);
      }
      Version then = null;
      for (Version v : e.getValue()) {
        if (v.from() <= l.timestamp) {
          then = v;
        }
      }
      boolean inside = then != null && then.shape() != null && then.shape().covers(point);
      if (inside) {
        now.add(id);
        dueIfEntered.put(id, then.delay() > 0 ? l.timestamp + then.delay() : Long.MAX_VALUE);
        if (then.delay() != DELAY && !before.contains(id)) {
          ownDelayStays.add(l.objectId + " " + id);
        }
      }
      Geometry current = current(id);
      if (inside != (current != null && current.covers(point))) {
        historicAnswers++;
      }
    }
    for (String f : now) {
      if (!before.contains(f)) {
        expectedTriggers.add(l.objectId + " " + f + " ENTER location " + l.timestamp);
        stays.computeIfAbsent(l.objectId, o -> new HashMap<>()).put(f, dueIfEntered.get(f));
        enters.put(l.objectId + " " + f, l.timestamp);
      }
    }
    for (String f : before) {
      if (!now.contains(f)) {
        expectedTriggers.add(l.objectId + " " + f + " EXIT location " + l.timestamp);
        endStay(l.objectId, f);
      }
    }
  }

  /** A stay open at {@code time}, or ending then, DWELLs if it has lasted its delay and has not yet. */
  private void dwellIfDue(String object, String fence, long time) {
    long due = stays.get(object).get(fence);
    if (due <= time && dwelled.add(object + " " + fence)) {
      expectedTriggers.add(object + " " + fence + " DWELL loitering " + due);
      ownDelayDwells += ownDelayStays.contains(object + " " + fence) ? 1 : 0;
    }
    neverPastTheJobsDelay += due == Long.MAX_VALUE && time - DELAY >= enters.get(object + " " + fence) ? 1 : 0;
  }

  /** The object fell silent at {@code at}: every stay of it ends then. */
  private void silence(String object, long at) {
    for (String fence : new ArrayList<>(stays.get(object).keySet())) {
      dwellIfDue(object, fence, at);
      expectedTriggers.add(object + " " + fence + " EXIT silence " + at);
      endStay(object, fence);
    }
  }

  private void endStay(String object, String fence) {
    Map<String, Long> open = stays.get(object);
    open.remove(fence);
    dwelled.remove(object + " " + fence);
    ownDelayStays.remove(object + " " + fence);
    enters.remove(object + " " + fence);
    if (open.isEmpty()) {
      stays.remove(object);
    }
  }

  /**
   * The triggers as object, fence, kind, cause and time (a delete's EXIT without it: its id leaves
   * the time out). An EXIT the fence's reshape caused is counted and compared as one by location:
   * which it is depends on whether the fence's version at the object's previous location is still
   * kept (docs/semantics.md#causes), which the oracle does not model.
   */
  private Set<String> triggersWithCauses() throws Exception {
    Set<String> rows = new TreeSet<>();
    reshaped = 0;
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT object_id, fence_id, kind, cause, (extract(epoch FROM event_time) * 1000)::bigint FROM geofence_triggers")) {
      while (r.next()) {
        String cause = r.getString(4);
        if (cause.equals("fence-reshaped")) {
          reshaped++;
          cause = "location";
        }
        rows.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + cause
            + (cause.equals("fence-deleted") ? "" : " " + r.getLong(5)));
      }
    }
    return rows;
  }

  private Geometry current(String id) {
    List<Version> versions = timelines.get(id);
    return versions.get(versions.size() - 1).shape();
  }

  /** The locations' dead letters: object, reason, event time. */
  private Set<String> locationDeadLetters() throws Exception {
    Set<String> rows = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT key, reason, floor(extract(epoch FROM event_time) * 1000)::bigint FROM geofence_dead_letters WHERE source = 'location'")) {
      while (r.next()) {
        rows.add(r.getString(1) + " " + r.getString(2) + " " + r.getLong(3));
      }
    }
    return rows;
  }
}
