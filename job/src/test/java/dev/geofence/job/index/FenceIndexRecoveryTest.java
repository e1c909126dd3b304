package dev.geofence.job.index;

import static dev.geofence.job.index.FenceIndexOperatorTest.location;
import static dev.geofence.job.index.FenceIndexOperatorTest.triggers;
import static dev.geofence.job.index.FenceIndexOperatorTest.upsert;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.model.HydrationEpisode.GapCheck;
import dev.geofence.connectors.model.HydrationEpisode.StartMode;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.hold.ReadingEvent;
import dev.geofence.job.hold.SlotReadyEvent;
import dev.geofence.job.hold.StreamStartEvent;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.readiness.Rereads;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.IntPredicate;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.tasks.mailbox.TaskMailbox;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;

/**
 * The operator's side of the restore protocol against a real PostgreSQL ({@link RecoverySteps},
 * driven through the operator, which applies what they read): the gap check retried while the
 * database is unreachable, a rebuild from the source of truth when the restored state is of a
 * format this release cannot read, a checkpoint taken during a fresh start's read, a slot ahead of
 * the restored position, a re-read the source did not answer. The database work runs on the
 * recovery's own thread; the tests move the harness's processing time on until its outcome has
 * been taken.
 */
class FenceIndexRecoveryTest {

  private static final String SQUARE = "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))";
  private static final String FAR_SQUARE = "POLYGON ((20 20, 30 20, 30 30, 20 30, 20 20))";
  private static final String FARTHER_SQUARE = "POLYGON ((40 40, 50 40, 50 50, 40 50, 40 40))";
  /** A stream position past anything a fresh server has written, so a new slot never looks ahead of it. */
  private static final long FAR_LSN = 0x7FFF_0000_0000_0000L;

  @Test
  void unreachableDatabaseAtRestoreHoldsLocationsUntilItIsBack() throws Exception {
    int port = freePort();
    OperatorSubtaskState snapshot;
    try (var harness = harness(new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB))) {
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      FenceChange a = upsert("a", 1, SQUARE, false, 100);
      a.lsn = FAR_LSN;
      source.send(a);
      source.sendAllBuckets();
      harness.processBothWatermarks(new Watermark(150));
      snapshot = harness.snapshot(1, 150);
    }
    FenceIndexOperator operator = operator(port, "slot_unreachable");
    try (var harness = harness(operator)) {
      harness.initializeState(snapshot);
      harness.open();
      assertThat(operator.view().phase()).isEqualTo(LoadPhase.GAP_CHECK);
      harness.processElement2(location("o1", 500, 5, 5), 500);
      harness.processBothWatermarks(new Watermark(1000));
      advanceUntil(harness, () -> episodes(harness).stream().anyMatch(e -> e.gapCheck == GapCheck.UNREACHABLE), "the check found the database unreachable");
      assertThat(triggers(harness)).as("nothing evaluated while the gap check cannot run").isEmpty();
      assertThat(operator.view().phase()).as("still retrying").isEqualTo(LoadPhase.GAP_CHECK);

      try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setPort(port).setServerConfig("wal_level", "logical").start();
          Connection db = pg.getPostgresDatabase().getConnection();
          Statement s = db.createStatement()) {
        Migrations.applySource(db, Migrations.GeometryColumn.WKB);
        s.execute("SELECT pg_create_logical_replication_slot('slot_unreachable', 'pgoutput')");
        advanceUntil(harness, () -> operator.view().phase() == LoadPhase.READY, "ready once the database is back");
        assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=500");
      }
      List<HydrationEpisode> rows = episodes(harness);
      assertThat(rows).extracting(e -> e.gapCheck).contains(GapCheck.UNREACHABLE, GapCheck.COVERED);
      HydrationEpisode last = rows.get(rows.size() - 1);
      assertThat(last.installedAt).isEqualTo(rows.get(0).installedAt);
      assertThat(last.startMode).isEqualTo(StartMode.CHECKPOINT);
      assertThat(last.hydratedAt).isGreaterThanOrEqualTo(last.indexedAt);
      assertThat(last.fencesLoaded).isEqualTo(1);
      assertThat(last.checksumMatch).isTrue();
    }
  }

  @Test
  void stateOfAnUnknownFormatIsRebuiltFromTheSource() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      s.execute("SELECT pg_create_logical_replication_slot('slot_format', 'pgoutput')");
      writeFences(db, new String[][] {{"a", SQUARE}, {"b", FAR_SQUARE}, {"c", SQUARE}});
      s.execute("UPDATE fences SET geom = geom WHERE id = 'a'");
      s.execute("DELETE FROM fences WHERE id = 'c'");

      OperatorSubtaskState snapshot;
      FenceIndexOperator other = writingAnUnknownFormat();
      try (var harness = harness(other)) {
        harness.open();
        FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
        source.send(upsert("a", 1, FAR_SQUARE, true, 0));
        source.send(upsert("c", 1, SQUARE, true, 0));
        source.sendAllBuckets();
        snapshot = harness.snapshot(1, 10);
      }
      FenceIndexOperator operator = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_format"), null);
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.REBUILDING);
        advanceUntil(harness, () -> !operator.view().recovering(), "the rebuild's read");
        assertThat(operator.view().phase()).as("rebuilt, waiting for the stream to pass the read").isEqualTo(LoadPhase.CATCHING_UP);
        assertThat(operator.view().fences().seqOf("a")).isEqualTo(2);
        assertThat(operator.view().fences().isLive("b")).isTrue();
        assertThat(operator.view().fences().isLive("c")).isFalse();
        assertThat(operator.view().fences().seqOf("c")).isEqualTo(2);
        heartbeat(harness, FAR_LSN, 200);
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        harness.processElement2(location("o1", 300, 5, 5), 300);
        harness.processElement2(location("o2", 300, 25, 25), 300);
        harness.processBothWatermarks(new Watermark(400));
        assertThat(triggers(harness)).extracting(Object::toString).containsExactlyInAnyOrder("ENTER o1 a@2 t=300", "ENTER o2 b@1 t=300");
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.gapCheck).isEqualTo(GapCheck.GAP);
        assertThat(last.gapReason).contains("state format");
        assertThat(last.hydratedAt).isPositive();
      }
    }
  }

  /**
   * A rebuild over a set that holds none of a fence's versions (restored state of a format this
   * release cannot read) reads the fence's tombstone before its re-created row. The delete EXITs
   * the members that entered a version before it, by the seq each member keeps (ADR 0020): an
   * object that entered the re-created fence stays inside it (before, it was EXITed at the
   * delete's time, before its own ENTER); one inside a fence deleted while the job was down leaves
   * it, and so does one that entered a fence later deleted for good, even after the delete's
   * transaction began (the tombstone's time).
   */
  @Test
  void aRebuildOfUnreadableStateKeepsTheMembersOfAFenceReCreatedBeforeTheSavepoint() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      s.execute("SELECT pg_create_logical_replication_slot('slot_reborn', 'pgoutput')");
      // d deleted and re-created (seq 3, after its tombstone of seq 2) before the savepoint; g
      // deleted for good, its delete's transaction begun before o3 entered it (as the state has it).
      writeFences(db, new String[][] {{"d", SQUARE}, {"e", FAR_SQUARE}, {"g", FARTHER_SQUARE}});
      s.execute("DELETE FROM fences WHERE id = 'd'");
      s.execute("DELETE FROM fences WHERE id = 'g'");
      writeFences(db, new String[][] {{"d", SQUARE}});
      long now = System.currentTimeMillis();

      OperatorSubtaskState snapshot;
      FenceIndexOperator other = writingAnUnknownFormat();
      try (var harness = harness(other)) {
        harness.open();
        FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
        source.send(upsert("d", 3, SQUARE, true, 0));
        source.send(upsert("e", 1, FAR_SQUARE, true, 0));
        source.send(upsert("g", 1, FARTHER_SQUARE, true, 0));
        source.sendAllBuckets();
        // o1 entered the re-created d; o2 entered e a minute before the delete below; o3 entered g.
        harness.processElement2(location("o1", now + 100, 5, 5), now + 100);
        harness.processElement2(location("o2", now - 60_000, 25, 25), now - 60_000);
        harness.processElement2(location("o3", now + 100, 45, 45), now + 100);
        harness.processBothWatermarks(new Watermark(now + 200));
        assertThat(triggers(harness)).extracting(Object::toString).containsExactlyInAnyOrder(
            "ENTER o1 d@3 t=" + (now + 100), "ENTER o2 e@1 t=" + (now - 60_000), "ENTER o3 g@1 t=" + (now + 100));
        snapshot = harness.snapshot(1, now + 200);
      }
      s.execute("DELETE FROM fences WHERE id = 'e'");

      FenceIndexOperator operator = operator(pg.getPort(), "slot_reborn");
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.REBUILDING);
        advanceUntil(harness, () -> !operator.view().recovering(), "the rebuild's read");
        assertThat(operator.view().fences().seqOf("d")).isEqualTo(3);
        assertThat(operator.view().fences().isLive("e")).isFalse();
        heartbeat(harness, FAR_LSN, System.currentTimeMillis());
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        // o1 leaves d: an EXIT only if it was still inside.
        long later = System.currentTimeMillis() + 1_000;
        harness.processElement2(location("o1", later, 25, 25), later);
        harness.processBothWatermarks(new Watermark(later + 100));
        assertThat(triggers(harness)).extracting(Object::toString).satisfiesExactlyInAnyOrder(
            t -> assertThat(t).as("o2 EXITs the fence deleted while down").startsWith("EXIT o2 e@2 t="),
            t -> assertThat(t).as("o3 EXITs g, which the read did not bring back").startsWith("EXIT o3 g@2 t="),
            t -> assertThat(t).as("o1 was still inside the re-created d").isEqualTo("EXIT o1 d@3 t=" + later));
      }
    }
  }

  /**
   * A fresh start reads its buckets from the source; state checkpointed before that read was done
   * lacks fences the stream will never bring again, so a restore of it reads them again.
   */
  @Test
  void aCheckpointTakenDuringTheFreshStartsReadIsReadAgainWhenRestored() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      s.execute("SELECT pg_create_logical_replication_slot('slot_fresh', 'pgoutput')");
      try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
        for (int i = 0; i < 20; i++) {
          insert.setString(1, "fence-" + i);
          insert.setBytes(2, new WKBWriter().write(new WKTReader().read(SQUARE)));
          insert.execute();
        }
      }
      OperatorSubtaskState snapshot;
      FenceIndexOperator fresh = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_fresh"), null);
      try (var harness = harness(fresh)) {
        harness.open();
        assertThat(fresh.view().phase()).isEqualTo(LoadPhase.LOADING);
        // The read's rows are taken only as processing time moves on: none yet.
        snapshot = harness.snapshot(1, 10);
      }
      FenceIndexOperator restored = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_fresh"), null);
      try (var harness = harness(restored)) {
        harness.initializeState(snapshot);
        harness.open();
        assertThat(restored.view().phase()).isEqualTo(LoadPhase.REBUILDING);
        advanceUntil(harness, () -> !restored.view().recovering(), "the read again");
        heartbeat(harness, FAR_LSN, 20);
        assertThat(restored.view().phase()).isEqualTo(LoadPhase.READY);
        assertThat(restored.view().fences().liveCount()).isEqualTo(20);
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.gapReason).isEqualTo(FenceIndexOperator.INCOMPLETE_LOAD);
      }
    }
  }

  /**
   * A slot confirmed past the restored position (as after any stop with a savepoint, whose CDC
   * offset runs ahead of the last change it forwarded): the restore holds if the bucket versions
   * at the catch-up target all arrive, and is rebuilt if an edit lay in between.
   */
  @Test
  void aSlotAheadOfTheRestoredPositionIsProvenByBucketVersions() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      // The state of a job that had read the source up to LSN 1: everything, by a consistent read;
      // o1 is inside every even fence (the squares at 0..10).
      OperatorSubtaskState snapshot = stateWithAnObjectInside(db, 50, i -> i % 2 == 0);
      s.execute("SELECT pg_create_logical_replication_slot('slot_ahead', 'pgoutput')");

      FenceIndexOperator proven = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_ahead"), null);
      try (var harness = harness(proven)) {
        harness.initializeState(snapshot);
        harness.open();
        advanceUntil(harness, () -> !proven.view().recovering(), "the gap check");
        assertThat(proven.view().phase()).as("the versions are not proven until the stream passes the target").isEqualTo(LoadPhase.CATCHING_UP);
        heartbeat(harness, FAR_LSN, 20);
        assertThat(proven.view().phase()).isEqualTo(LoadPhase.READY);
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.gapCheck).isEqualTo(GapCheck.COVERED);
        assertThat(last.gapReason).contains("past the restored", "proven by the bucket versions");
      }

      // While the job is down, fence-8 is deleted and re-created elsewhere, before the slot's position.
      s.execute("DELETE FROM fences WHERE id = 'fence-8'");
      try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES ('fence-8', ?)")) {
        insert.setBytes(1, new WKBWriter().write(new WKTReader().read(FAR_SQUARE)));
        insert.execute();
      }
      FenceIndexOperator skipped = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_ahead"), null);
      try (var harness = harness(skipped)) {
        harness.initializeState(snapshot);
        harness.open();
        advanceUntil(harness, () -> !skipped.view().recovering(), "the gap check");
        assertThat(skipped.view().fences().seqOf("fence-8")).isEqualTo(1);
        heartbeat(harness, FAR_LSN, 40);
        assertThat(skipped.view().phase()).as("fence-8's edits lay before the slot's position").isEqualTo(LoadPhase.REBUILDING);
        advanceUntil(harness, () -> !skipped.view().recovering(), "the rebuild's read");
        assertThat(skipped.view().fences().seqOf("fence-8")).isEqualTo(3);
        // The rebuild learns of the delete from the tombstone the re-creation kept: o1 EXITs.
        assertThat(triggers(harness)).singleElement()
            .satisfies(t -> assertThat(t.toString()).startsWith("EXIT o1 fence-8@2"))
            .satisfies(t -> assertThat(t.lon).isNaN());
        heartbeat(harness, FAR_LSN + 1, 30);
        assertThat(skipped.view().phase()).isEqualTo(LoadPhase.READY);
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.gapCheck).isEqualTo(GapCheck.GAP);
        assertThat(last.gapReason).contains("skipped");
      }
    }
  }

  /**
   * A restore that catches up by reading what changed, or by loading its buckets anew (issue 37):
   * edits made while the job was down (a reshape, a delete, a delete and re-creation, a new fence,
   * one fence edited many times) are read whole (only they, or every fence after the restored ones
   * were set aside), in one transaction with the bucket rows; the source is stopped between the gap
   * check and the read, which is tried again once it is back. The deletes EXIT their members, and
   * only they (a load keeps the members of the fences it reads again), a location stamped before
   * the read is a BEFORE_READ dead letter, one after it sees the fences as the source has them, and
   * every seq equals the source's.
   */
  @ParameterizedTest
  @EnumSource(value = CatchUp.class, names = {"READ", "LOAD"})
  void aCoveredRestoreCatchesUpByReadingWhatChanged(CatchUp path, @TempDir Path dir) throws Exception {
    int port = freePort();
    Path data = dir.resolve("pg");
    EmbeddedPostgres pg = postgres(port, data);
    try {
      OperatorSubtaskState snapshot;
      try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
        snapshot = stateWithAnObjectInside(db, 50, i -> i % 2 == 0);
        s.execute("SELECT pg_create_logical_replication_slot('slot_read', 'pgoutput')");
        byte[] far = new WKBWriter().write(new WKTReader().read(FAR_SQUARE));
        try (PreparedStatement reshape = db.prepareStatement("UPDATE fences SET geom = ? WHERE id = 'fence-2'")) {
          reshape.setBytes(1, far);
          reshape.execute();
        }
        s.execute("DELETE FROM fences WHERE id = 'fence-4'");
        s.execute("DELETE FROM fences WHERE id = 'fence-6'");
        try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
          insert.setString(1, "fence-6");
          insert.setBytes(2, far);
          insert.execute();
          insert.setString(1, "fence-60");
          insert.setBytes(2, new WKBWriter().write(new WKTReader().read(SQUARE)));
          insert.execute();
        }
        for (int i = 0; i < 5; i++) {
          s.execute("UPDATE fences SET geom = geom WHERE id = 'fence-10'");
        }
      }

      FenceIndexOperator operator = operator(port, "slot_read").catchingUp(path, true);
      Told told = told(operator);
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        assertThat(operator.view().fences().liveCount()).as("every restored fence read, or for a load only those of buckets"
            + " with members").isEqualTo(path == CatchUp.READ ? 50 : inBucketsOf(50, i -> i % 2 == 0));
        // The gap check's verdict waits in the mailbox; the source goes before the read can begin.
        Waiting.until("the gap check's verdict", Duration.ofMinutes(1), () -> harness.getTaskMailbox().hasMail());
        pg.close();
        advanceUntil(harness, () -> episodes(harness).stream().anyMatch(e -> path.label().equals(e.catchupPath)), "the catch-up's choice");
        slotReady(harness, operator, told);
        advanceUntil(harness, () -> !operator.view().recovering(), "the read to find the source unreachable");
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.CATCHING_UP);
        assertStreamAskedForWhileTheSourceIsOut(path, told.streamStarts());
        assertThat(operator.view().fences().seqOf("fence-10")).as("restored, or set aside for the load")
            .isEqualTo(path == CatchUp.READ ? 1 : 0);
        pg = postgres(port, data);
        advanceUntil(harness, () -> !operator.view().recovering() && operator.view().fences().seqOf("fence-10") == 6,
            "the read of what changed, tried again once the source is back");

        Map<String, Long> held = heldSeqs(operator);
        assertThat(held).as("the fences and seqs held, against the source's").isEqualTo(sourceSeqs(pg));
        assertStreamAskedForOnce(path, told.streamStarts());
        assertThat(held).containsEntry("fence-2", 2L).containsEntry("fence-6", 3L).containsEntry("fence-60", 1L)
            .containsEntry("fence-10", 6L).doesNotContainKey("fence-4");
        assertThat(triggers(harness).stream().map(t -> t.kind + " " + t.fenceId))
            .as("the deletes EXIT their member").containsExactlyInAnyOrder("EXIT fence-4", "EXIT fence-6");

        long now = System.currentTimeMillis() + 60_000;
        heartbeat(harness, FAR_LSN, now);
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        harness.processElement2(location("o1", 40, 5, 5), 40);
        harness.processElement2(location("o1", now, 5, 5), now);
        harness.processBothWatermarks(new Watermark(now + 1));
        assertThat(triggers(harness).stream().skip(2).map(t -> t.kind + " " + t.fenceId + " " + t.eventTime))
            .as("after the read: fence-2 reshaped away, fence-60 new")
            .containsExactlyInAnyOrder("EXIT fence-2 " + now, "ENTER fence-60 " + now);
        assertThat(harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS)).singleElement()
            .satisfies(l -> assertThat(l.getValue().reason).isEqualTo(LocationTimePolicy.BEFORE_READ))
            .satisfies(l -> assertThat(l.getValue().eventTime).isEqualTo(40));
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.catchupPath).isEqualTo(path.label());
        assertThat(last.catchupReason).contains("forced");
        assertThat(last.catchupReason.contains("decided before the restore read the fences")).isEqualTo(path == CatchUp.LOAD);
        assertThat(last.catchupLoadEstimateMs).isNotNull();
        assertThat(last.catchupBacklog).as("ten transactions, each of one bucket").isEqualTo(10);
        assertThat(last.catchupReplayEstimateMs).isNotNull();
        assertThat(last.hydratedAt).isPositive();
        // What the keyed state holds now, read back: the source's fences, none of those set aside.
        OperatorSubtaskState after = harness.snapshot(3, now + 2);
        FenceIndexOperator reread = new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB);
        try (var again = harness(reread)) {
          again.initializeState(after);
          again.open();
          assertThat(heldSeqs(reread)).as("the fences and seqs stored").isEqualTo(sourceSeqs(pg));
        }
      }
    } finally {
      pg.close();
    }
  }

  /**
   * A backlog that makes the load the cheapest, seen before the restore reads the fences (the job's
   * choice, locations not replayed): the restore reads only the buckets of fences with members, the
   * load brings the rest. With the slot there, the catch-up loads and the deleted fence with a
   * member EXITs it; without, the gap check fails and the rebuild first reads the fences the
   * restore left unread, so that one the source has no row of at all (its tombstone pruned) is
   * gone from the stored state too.
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void aLoadChosenBeforeTheRestoreReadsOnlyTheFencesWithMembers(boolean slotKept, @TempDir Path dir) throws Exception {
    int port = freePort();
    // A fence without members in a bucket of none with members: the restore leaves it unread.
    Set<Integer> memberBuckets = IntStream.range(0, 5).mapToObj(i -> FenceBuckets.of("fence-" + i)).collect(Collectors.toSet());
    String unread = IntStream.range(5, 600).mapToObj(i -> "fence-" + i).filter(id -> !memberBuckets.contains(FenceBuckets.of(id)))
        .findFirst().orElseThrow();
    try (EmbeddedPostgres pg = postgres(port, dir.resolve("pg"))) {
      OperatorSubtaskState snapshot;
      try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
        snapshot = stateWithAnObjectInside(db, 600, i -> i < 5);
        if (slotKept) {
          s.execute("SELECT pg_create_logical_replication_slot('slot_probe', 'pgoutput')");
        }
        // Every fence edited ten times: the replay would cost far more than loading them.
        for (int i = 0; i < 10; i++) {
          s.execute("UPDATE fences SET geom = geom");
        }
        s.execute("DELETE FROM fences WHERE id IN ('fence-0', '" + unread + "')");
        // Its tombstone pruned too: the source has no row of it at all.
        s.execute("DELETE FROM fence_tombstones WHERE id = '" + unread + "'");
      }

      FenceIndexOperator operator = operator(port, "slot_probe").catchingUp(CatchUp.AUTO, false);
      Told told = told(operator);
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        assertThat(operator.view().fences().liveCount()).as("only the fences of buckets with members read")
            .isEqualTo(inBucketsOf(600, i -> i < 5));
        if (slotKept) {
          slotReady(harness, operator, told);
          advanceUntil(harness, () -> !operator.view().recovering() && operator.view().fences().seqOf("fence-1") == 11, "the load");
          HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
          assertThat(last.catchupPath).isEqualTo(CatchUp.LOAD.label());
          assertThat(last.catchupReason).contains("load is the cheapest").contains("decided before the restore read the fences");
        } else {
          advanceUntil(harness, () -> episodes(harness).stream().anyMatch(e -> e.gapCheck == GapCheck.GAP)
              && !operator.view().recovering() && operator.view().fences().seqOf("fence-1") == 11, "the rebuild");
        }
        assertThat(heldSeqs(operator)).as("the fences and seqs held, against the source's").isEqualTo(sourceSeqs(pg));
        assertThat(triggers(harness).stream().map(t -> t.kind + " " + t.fenceId)).as("the delete EXITs its member")
            .containsExactly("EXIT fence-0");
        // What the keyed state holds now, read back: the source's fences, none of those left unread.
        OperatorSubtaskState after = harness.snapshot(2, 40);
        FenceIndexOperator reread = new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB);
        try (var again = harness(reread)) {
          again.initializeState(after);
          again.open();
          assertThat(heldSeqs(reread)).as("the fences and seqs stored").isEqualTo(sourceSeqs(pg));
        }
      }
    }
  }

  /**
   * The state of a job that read fences {@code fence-0 .. fence-(n-1)} (those {@code inside}
   * accepts around the point (5, 5), the rest far away) from the source it writes them to, streamed
   * up to position 1, and saw object o1 at (5, 5): o1 is their member.
   */
  private static OperatorSubtaskState stateWithAnObjectInside(Connection db, int n, IntPredicate inside) throws Exception {
    Migrations.applySource(db, Migrations.GeometryColumn.WKB);
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
      for (int i = 0; i < n; i++) {
        insert.setString(1, "fence-" + i);
        insert.setBytes(2, new WKBWriter().write(new WKTReader().read(inside.test(i) ? SQUARE : FAR_SQUARE)));
        insert.execute();
      }
    }
    try (var harness = harness(new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB))) {
      harness.open();
      dev.geofence.connectors.source.BucketRead.read(db, dev.geofence.connectors.cdc.FenceTableColumns.defaults(), 128, 0, 127,
          change -> {
            try {
              harness.processElement1(change, 0);
            } catch (Exception e) {
              throw new AssertionError(e);
            }
          });
      heartbeat(harness, 1, 10);
      harness.processElement2(location("o1", 20, 5, 5), 20);
      harness.processBothWatermarks(new Watermark(30));
      assertThat(triggers(harness)).as("o1 inside the fences placed around it").hasSize((int) IntStream.range(0, n).filter(inside).count());
      return harness.snapshot(1, 30);
    }
  }

  /** How many of {@code fence-0 .. fence-(n-1)} share a bucket with one of those {@code members} accepts. */
  private static long inBucketsOf(int n, IntPredicate members) {
    Set<Integer> buckets = IntStream.range(0, n).filter(members).mapToObj(i -> FenceBuckets.of("fence-" + i)).collect(Collectors.toSet());
    return IntStream.range(0, n).filter(i -> buckets.contains(FenceBuckets.of("fence-" + i))).count();
  }

  /**
   * The source restarts in the middle of a catch-up's read of what changed (its rows half handed
   * over, the read's transaction open): the read fails, is tried again once the source is back,
   * and the subtask ends with exactly the source's fences.
   */
  @ParameterizedTest
  @EnumSource(value = CatchUp.class, names = {"READ", "LOAD"})
  void aReadOfWhatChangedCutByARestartOfTheSourceIsTriedAgain(CatchUp path, @TempDir Path dir) throws Exception {
    int port = freePort();
    Path data = dir.resolve("pg");
    EmbeddedPostgres pg = postgres(port, data);
    try {
      int fences = 12_000;
      OperatorSubtaskState snapshot = everyFenceChangedSince(pg, fences, "slot_cut");
      FenceIndexOperator operator = operator(port, "slot_cut").catchingUp(path, true);
      Told told = told(operator);
      try (var harness = harness(operator)) {
        cutInTheRead(harness, operator, told, snapshot, path, pg);
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.CATCHING_UP);
        assertStreamAskedForWhileTheSourceIsOut(path, told.streamStarts());
        // A load's state checkpointed now holds part of the fences: restored, it is not trusted.
        OperatorSubtaskState cut = harness.snapshot(2, 20);
        pg = postgres(port, data);
        advanceUntil(harness, () -> !operator.view().recovering() && operator.view().fences().seqOf("fence-" + (fences - 1)) == 2
            && operator.view().fences().seqOf("fence-0") == 2, "the read tried again once the source is back");
        Map<String, Long> held = heldSeqs(operator);
        assertThat(held).as("the fences and seqs held, against the source's").isEqualTo(sourceSeqs(pg));
        assertStreamAskedForOnce(path, told.streamStarts());
        heartbeat(harness, FAR_LSN, System.currentTimeMillis());
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        if (path == CatchUp.LOAD) {
          FenceIndexOperator restored = operator(port, "slot_cut").catchingUp(path, true);
          try (var again = harness(restored)) {
            again.initializeState(cut);
            again.open();
            assertThat(restored.view().phase()).isEqualTo(LoadPhase.REBUILDING);
            advanceUntil(again, () -> !restored.view().recovering(), "the rebuild");
            assertThat(heldSeqs(restored)).isEqualTo(sourceSeqs(pg));
            assertThat(episodes(again).get(episodes(again).size() - 1).gapReason).isEqualTo(FenceIndexOperator.INCOMPLETE_CATCH_UP_LOAD);
          }
        }
      }
    } finally {
      pg.close();
    }
  }

  /**
   * A catch-up's load cut by the source, then an edit of a fence it set aside, which the emptied
   * index takes as a gap: the rebuild that follows reads every fence, and the state checkpointed
   * once it is ready is trusted when restored. Before, the load counted as under way for good, and
   * every later checkpoint and savepoint was restored by a rebuild.
   */
  @Test
  void aLoadReplacedByARebuildLeavesNoLaterCheckpointUntrusted(@TempDir Path dir) throws Exception {
    int port = freePort();
    Path data = dir.resolve("pg");
    EmbeddedPostgres pg = postgres(port, data);
    try {
      OperatorSubtaskState snapshot = everyFenceChangedSince(pg, 12_000, "slot_gap");
      FenceIndexOperator operator = operator(port, "slot_gap").catchingUp(CatchUp.LOAD, true);
      Told told = told(operator);
      try (var harness = harness(operator)) {
        cutInTheRead(harness, operator, told, snapshot, CatchUp.LOAD, pg);
        // fence-0 at the source's version, which the emptied index has not read again: a gap.
        harness.processElement1(upsert("fence-0", 2, SQUARE, false, System.currentTimeMillis()), 0);
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.REBUILDING);
        pg = postgres(port, data);
        advanceUntil(harness, () -> !operator.view().recovering() && operator.view().phase() != LoadPhase.REBUILDING,
            "the rebuild once the source is back");
        assertThat(heldSeqs(operator).equals(sourceSeqs(pg))).as("the fences and seqs held are the source's").isTrue();
        heartbeat(harness, FAR_LSN, System.currentTimeMillis());
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        OperatorSubtaskState ready = harness.snapshot(3, 30);

        FenceIndexOperator restored = operator(port, "slot_gap").catchingUp(CatchUp.LOAD, true);
        try (var again = harness(restored)) {
          again.initializeState(ready);
          again.open();
          assertThat(episodes(again)).as("the restored state's episodes")
              .noneMatch(e -> FenceIndexOperator.INCOMPLETE_CATCH_UP_LOAD.equals(e.gapReason));
          assertThat(restored.view().phase()).isNotEqualTo(LoadPhase.REBUILDING);
        }
      }
    } finally {
      pg.close();
    }
  }

  /**
   * A rebuild of state in a format this release cannot read, cut by the source and tried again:
   * what the first attempt stored stays stored. Before, the retry removed every unreadable fence
   * again, those the first attempt had stored too, and its read found them held at their seq (a
   * duplicate, not stored again): live in memory, missing from every checkpoint after.
   */
  @Test
  void aRebuildOfUnreadableStateTriedAgainKeepsWhatItStored(@TempDir Path dir) throws Exception {
    int port = freePort();
    Path data = dir.resolve("pg");
    EmbeddedPostgres pg = postgres(port, data);
    try {
      int fences = 12_000;
      OperatorSubtaskState snapshot = squaresRead(pg, fences, "slot_unreadable", new FenceIndexState.Writing((byte) 9, false));
      FenceIndexOperator operator = operator(port, "slot_unreadable");
      OperatorSubtaskState ready;
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.REBUILDING);
        Waiting.until("the rebuild to wait for the task", Duration.ofMinutes(1), () -> harness.getTaskMailbox().size() >= 4);
        pg.close();
        advanceUntil(harness, () -> !operator.view().recovering(), "the cut rebuild to fail");
        assertThat(operator.view().fences().liveCount()).as("part of the fences read and stored").isPositive().isLessThan(fences);
        pg = postgres(port, data);
        advanceUntil(harness, () -> !operator.view().recovering() && operator.view().phase() != LoadPhase.REBUILDING,
            "the rebuild tried again once the source is back");
        heartbeat(harness, FAR_LSN, System.currentTimeMillis());
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        ready = harness.snapshot(2, 20);
      }
      FenceIndexOperator restored = new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB);
      try (var again = harness(restored)) {
        again.initializeState(ready);
        again.open();
        assertThat(restored.view().fences().liveCount()).as("every fence in the state checkpointed once ready").isEqualTo(fences);
      }
    } finally {
      pg.close();
    }
  }

  /**
   * A bucket left mismatched by an edit the stream never carried is read again; when the source
   * does not answer that re-read, the bucket is read again once the source is back (after its
   * backoff, in the same episode), and the index is ready again. Before, the failed re-read counted as done
   * for that version, and the bucket's locations stayed held until an edit moved it on.
   */
  @Test
  void aRereadTheSourceDidNotAnswerIsReadAgainOnceItIsBack(@TempDir Path dir) throws Exception {
    int port = freePort();
    Path data = dir.resolve("pg");
    EmbeddedPostgres pg = postgres(port, data);
    try {
      try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
        Migrations.applySource(db, Migrations.GeometryColumn.WKB);
        try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
          for (int i = 0; i < 10; i++) {
            insert.setString(1, "fence-" + i);
            insert.setBytes(2, new WKBWriter().write(new WKTReader().read(SQUARE)));
            insert.execute();
          }
        }
        s.execute("SELECT pg_create_logical_replication_slot('slot_reread', 'pgoutput')");
      }
      FenceIndexOperator operator = operator(port, "slot_reread");
      try (var harness = harness(operator)) {
        harness.open();
        advanceUntil(harness, () -> !operator.view().recovering(), "the fresh start's read");
        long t = 1_000_000;
        heartbeat(harness, FAR_LSN, t);
        harness.processBothWatermarks(new Watermark(t));
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);

        // fence-3 reshaped at the source; the stream carries its bucket's fingerprint, not the edit.
        FenceChange fingerprint = new FenceChange();
        fingerprint.kind = FenceChange.Kind.BUCKET_STATS;
        try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
          s.execute("UPDATE fences SET geom = geom WHERE id = 'fence-3'");
          try (var r = s.executeQuery("SELECT bucket, fence_count, checksum, version FROM fence_bucket_stats WHERE bucket = fence_bucket('fence-3')")) {
            r.next();
            fingerprint.bucket = r.getInt(1);
            fingerprint.fenceCount = r.getLong(2);
            fingerprint.checksum = r.getLong(3);
            fingerprint.seq = r.getLong(4);
          }
        }
        fingerprint.lsn = FAR_LSN + 1;
        fingerprint.commitTime = t + 1_000;
        harness.processElement1(fingerprint, fingerprint.commitTime);
        pg.close();
        long patience = FenceSourceOptions.builder().url("jdbc:postgresql://h/db").username("u").password("").build()
            .heartbeatInterval().toMillis();
        long clock = fingerprint.commitTime + patience + 1;
        harness.processBothWatermarks(new Watermark(clock));
        assertThat(operator.view().phase()).as("the bucket no longer matches").isNotEqualTo(LoadPhase.READY);
        assertThat(operator.view().recovering()).as("its re-read under way").isTrue();
        advanceUntil(harness, () -> !operator.view().recovering(), "the re-read to find the source unreachable");
        assertThat(operator.view().fences().seqOf("fence-3")).isEqualTo(1);

        pg = postgres(port, data);
        harness.setProcessingTime(harness.getProcessingTime() + WarmUp.RETRY_INTERVAL_MS);
        harness.processBothWatermarks(new Watermark(clock + 1_000));
        advanceUntil(harness, () -> operator.view().phase() == LoadPhase.READY, "the bucket read again once the source is back");
        assertThat(operator.view().fences().seqOf("fence-3")).isEqualTo(2);
        assertThat(episodes(harness).stream().filter(e -> e.startMode == StartMode.REBUILD).map(e -> e.installedAt).distinct())
            .as("the re-read, tried twice, is one episode").hasSize(1);
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.bucketsReread).as("read twice").isEqualTo(2);
        assertThat(last.hydratedAt).isPositive();
      }
    } finally {
      pg.close();
    }
  }

  /**
   * Readiness always arrives (issue 32): restored state that lacks one fence of a bucket whose
   * fingerprint says it is there (a corrupted bucket: no stream will ever bring that edit again)
   * cannot match until the bucket is read again. Once the stream has passed the catch-up target and
   * the clock is past the fingerprint, the bucket is read again although the subtask was never
   * ready, and it becomes ready with the source's fences; the warm-up's episode says so. Before,
   * only a subtask that had once been ready re-read a bucket, and this one held its locations for
   * good.
   */
  @Test
  void aRestoredBucketThatCannotMatchIsReadAgainBeforeTheFirstReady() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      insertSquares(db, 10);
      OperatorSubtaskState snapshot = restoredStateWithout(db, "fence-3", 1_000);
      try (Statement s = db.createStatement()) {
        s.execute("SELECT pg_create_logical_replication_slot('slot_corrupt', 'pgoutput')");
      }
      FenceIndexOperator operator = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_corrupt"), null);
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        advanceUntil(harness, () -> !operator.view().recovering(), "the gap check");
        assertThat(operator.view().phase()).as("caught up, one bucket short of the source").isEqualTo(LoadPhase.VERIFYING);
        harness.processElement2(location("o1", 2_000, 5, 5), 2_000);
        harness.processBothWatermarks(new Watermark(1_000 + patience()));
        assertThat(operator.view().recovering()).as("not yet a heartbeat interval past the fingerprint").isFalse();
        harness.processBothWatermarks(new Watermark(1_000 + patience() + 1));
        assertThat(operator.view().recovering()).as("its bucket read again").isTrue();
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.REREADING);
        advanceUntil(harness, () -> operator.view().phase() == LoadPhase.READY, "ready with the source's fences");
        assertThat(operator.view().fences().isLive("fence-3")).isTrue();
        harness.processBothWatermarks(new Watermark(3_000));
        assertThat(triggers(harness)).as("o1, held meanwhile, inside all ten").hasSize(10);
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.startMode).as("the restore's own episode").isEqualTo(StartMode.CHECKPOINT);
        assertThat(last.hydratedAt).isPositive();
        assertThat(last.bucketsReread).isEqualTo(1);
        assertThat(last.rereadReason).startsWith("bucket " + FenceBuckets.of("fence-3") + " still mismatched ")
            .endsWith("; read again from the source");
        assertThat(last.checksumMatch).isTrue();
      }
    }
  }

  /**
   * An edit applied on arrival leaves its bucket mismatched until its transaction's fingerprint,
   * the stream's next record, comes; the fence input's watermark may arrive between the two. The
   * bucket is not read again for it, though the clock is far past the bucket's last fingerprint:
   * the mismatch counts from the edit. Before, that watermark set off a re-read of a bucket that
   * had lost nothing (seen in the rescale stress test, as a warm-up that "healed" a bucket).
   */
  @Test
  void anEditWhoseFingerprintIsStillToComeIsNoLastingMismatch() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      insertSquares(db, 10);
      OperatorSubtaskState snapshot = restoredStateWithout(db, null, 1_000);
      s.execute("SELECT pg_create_logical_replication_slot('slot_in_flight', 'pgoutput')");
      FenceIndexOperator operator = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_in_flight"), null);
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        advanceUntil(harness, () -> !operator.view().recovering(), "the gap check");
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);

        // fence-3 moves: its edit and its bucket's fingerprint, one transaction, as the stream brings them.
        try (PreparedStatement move = db.prepareStatement("UPDATE fences SET geom = ? WHERE id = 'fence-3'")) {
          move.setBytes(1, new WKBWriter().write(new WKTReader().read(FAR_SQUARE)));
          move.execute();
        }
        long committed = 1_000 + 2 * patience();
        List<FenceChange> transaction = new ArrayList<>();
        dev.geofence.connectors.source.BucketRead.read(db, dev.geofence.connectors.cdc.FenceTableColumns.defaults(), 128, 0, 127,
            change -> {
              if (change.kind == FenceChange.Kind.FENCE ? change.fenceId.equals("fence-3")
                  : change.kind == FenceChange.Kind.BUCKET_STATS && change.bucket == FenceBuckets.of("fence-3")) {
                change.snapshot = false;
                change.lsn = FAR_LSN + 1;
                change.commitTime = committed;
                transaction.add(change);
              }
            });
        FenceChange edit = transaction.stream().filter(c -> c.kind == FenceChange.Kind.FENCE).findFirst().orElseThrow();
        FenceChange fingerprint = transaction.stream().filter(c -> c.kind == FenceChange.Kind.BUCKET_STATS).findFirst().orElseThrow();
        long seq = operator.view().fences().seqOf("fence-3");

        harness.processWatermark2(new Watermark(committed + patience()));
        harness.processElement1(edit, committed);
        assertThat(operator.view().fences().seqOf("fence-3")).as("applied on arrival: no location can see the fence without it")
            .isGreaterThan(seq);
        assertThat(operator.view().phase()).as("its fingerprint still to come").isEqualTo(LoadPhase.VERIFYING);
        harness.processWatermark1(new Watermark(committed - 1));
        assertThat(operator.view().recovering()).as("no re-read: the clock is not past the edit").isFalse();
        harness.processElement1(fingerprint, committed);
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.READY);
        assertThat(episodes(harness)).allSatisfy(e -> assertThat(e.bucketsReread).isZero());
      }
    }
  }

  /**
   * A bucket whose source fingerprint disagrees with the source's own fences (written outside the
   * versioning) cannot match even when read again: the subtask says so in its phase and keeps
   * trying with backoff, never failing; once the source is put right, the next try makes it ready.
   */
  @Test
  void aBucketThatCannotMatchEvenWhenReadAgainIsTriedAgainWithBackoff() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      insertSquares(db, 10);
      int bucket = FenceBuckets.of("fence-3");
      String flip = "UPDATE fence_bucket_stats SET checksum = checksum # 1, version = version + 1 WHERE bucket = " + bucket;
      s.execute(flip);
      OperatorSubtaskState snapshot = restoredStateWithout(db, null, 1_000);
      s.execute("SELECT pg_create_logical_replication_slot('slot_unmatchable', 'pgoutput')");
      FenceIndexOperator operator = new FenceIndexOperator(
          GeometryReadOptions.defaults(), GeometryFormat.WKB, options(pg.getPort(), "slot_unmatchable"), null);
      try (var harness = harness(operator)) {
        harness.initializeState(snapshot);
        harness.open();
        advanceUntil(harness, () -> !operator.view().recovering(), "the gap check");
        long clock = 1_000 + patience() + 1;
        harness.processBothWatermarks(new Watermark(clock));
        advanceUntil(harness, () -> !operator.view().recovering(), "the first re-read");
        assertThat(operator.view().phase()).as("read again, still not matching").isEqualTo(LoadPhase.REREADING);
        harness.processBothWatermarks(new Watermark(++clock));
        assertThat(operator.view().recovering()).as("not again within the backoff").isFalse();
        harness.setProcessingTime(harness.getProcessingTime() + Rereads.FIRST_RETRY_MS);
        harness.processBothWatermarks(new Watermark(++clock));
        assertThat(operator.view().recovering()).as("the second try, after the backoff").isTrue();
        advanceUntil(harness, () -> !operator.view().recovering(), "the second re-read");
        assertThat(operator.view().phase()).isEqualTo(LoadPhase.REREADING);
        assertThat(episodes(harness).get(episodes(harness).size() - 1).bucketsReread).isEqualTo(2);

        s.execute(flip);
        harness.setProcessingTime(harness.getProcessingTime() + 2 * Rereads.FIRST_RETRY_MS);
        harness.processBothWatermarks(new Watermark(++clock));
        advanceUntil(harness, () -> operator.view().phase() == LoadPhase.READY, "ready once the source is put right and read again");
        HydrationEpisode last = episodes(harness).get(episodes(harness).size() - 1);
        assertThat(last.bucketsReread).isEqualTo(3);
        assertThat(last.hydratedAt).isPositive();
      }
    }
  }

  // ---- helpers ----------------------------------------------------------------------------------

  /** The live fences of the source and their seqs. */
  private static Map<String, Long> sourceSeqs(EmbeddedPostgres pg) throws Exception {
    Map<String, Long> source = new TreeMap<>();
    try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement();
        var r = s.executeQuery("SELECT id, seq FROM fences")) {
      while (r.next()) {
        source.put(r.getString(1), r.getLong(2));
      }
    }
    return source;
  }

  /** The live fences the operator holds and their seqs. */
  private static Map<String, Long> heldSeqs(FenceIndexOperator operator) {
    Map<String, Long> held = new TreeMap<>();
    operator.view().fences().liveIds().forEach(id -> held.put(id, operator.view().fences().seqOf(id)));
    return held;
  }

  /**
   * A source of {@code fences} squares with a slot, and the state of a job that read them all:
   * every fence changed once since, so that a catch-up's read has more rows than the task takes
   * ahead.
   */
  private static OperatorSubtaskState everyFenceChangedSince(EmbeddedPostgres pg, int fences, String slot) throws Exception {
    OperatorSubtaskState snapshot = squaresRead(pg, fences, slot, FenceIndexState.Writing.CURRENT);
    try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      s.execute("UPDATE fences SET geom = geom");
    }
    return snapshot;
  }

  /** A source of {@code fences} squares with a slot, and the state, written as {@code writing} says, of a job that read them all. */
  private static OperatorSubtaskState squaresRead(EmbeddedPostgres pg, int fences, String slot, FenceIndexState.Writing writing)
      throws Exception {
    try (Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      insertSquares(db, fences);
      OperatorSubtaskState snapshot = restoredStateWithout(db, null, 10, writing);
      s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
      return snapshot;
    }
  }

  /**
   * Restores {@code snapshot} and stops the source in the middle of the catch-up's read by {@code
   * path}: the read hands its rows over in batches and waits when the task is that many behind, its
   * transaction open and part of its rows read; then the source goes, and the read fails.
   */
  private static void cutInTheRead(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness,
      FenceIndexOperator operator, Told told, OperatorSubtaskState snapshot, CatchUp path, EmbeddedPostgres pg) throws Exception {
    harness.initializeState(snapshot);
    harness.open();
    advanceUntil(harness, () -> episodes(harness).stream().anyMatch(e -> path.label().equals(e.catchupPath)), "the catch-up's choice");
    slotReady(harness, operator, told);
    Waiting.until("the read to wait for the task", Duration.ofMinutes(1), () -> harness.getTaskMailbox().size() >= 4);
    pg.close();
    advanceUntil(harness, () -> !operator.view().recovering(), "the cut read to fail");
  }

  private static void insertSquares(Connection db, int n) throws Exception {
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
      for (int i = 0; i < n; i++) {
        insert.setString(1, "fence-" + i);
        insert.setBytes(2, new WKBWriter().write(new WKTReader().read(SQUARE)));
        insert.execute();
      }
    }
  }

  /**
   * The state of a job that read every row of the source (but {@code missing}'s, if not null: a
   * bucket corrupted) and streamed up to {@link #FAR_LSN}, committed at {@code time}.
   */
  private static OperatorSubtaskState restoredStateWithout(Connection db, String missing, long time) throws Exception {
    return restoredStateWithout(db, missing, time, FenceIndexState.Writing.CURRENT);
  }

  /** As {@link #restoredStateWithout(Connection, String, long)}, the state written as {@code writing} says. */
  private static OperatorSubtaskState restoredStateWithout(Connection db, String missing, long time, FenceIndexState.Writing writing)
      throws Exception {
    try (var harness = harness(new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB).writing(writing))) {
      harness.open();
      dev.geofence.connectors.source.BucketRead.read(db, dev.geofence.connectors.cdc.FenceTableColumns.defaults(), 128, 0, 127,
          change -> {
            if (change.kind != FenceChange.Kind.FENCE || !change.fenceId.equals(missing)) {
              try {
                harness.processElement1(change, 0);
              } catch (Exception e) {
                throw new AssertionError(e);
              }
            }
          });
      heartbeat(harness, FAR_LSN, time);
      return harness.snapshot(1, time);
    }
  }

  /** How far the clock must be past a fingerprint before its bucket is read again: the heartbeat interval. */
  private static long patience() {
    return FenceSourceOptions.builder().url("jdbc:postgresql://h/db").username("u").password("").build().heartbeatInterval().toMillis();
  }

  /**
   * Runs what the source of truth's thread has handed to the task's mailbox, and moves the
   * harness's processing time on a little (for the warm-up's retry timers), until {@code condition}
   * holds; fails saying what it awaited.
   */
  private static void advanceUntil(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness,
      BooleanSupplier condition, String what) throws Exception {
    Waiting.until(what, Duration.ofMinutes(1), () -> {
      for (var mail = harness.getTaskMailbox().tryTake(TaskMailbox.MIN_PRIORITY); mail.isPresent();
          mail = harness.getTaskMailbox().tryTake(TaskMailbox.MIN_PRIORITY)) {
        mail.get().run();
      }
      if (condition.getAsBoolean()) {
        return true;
      }
      harness.setProcessingTime(harness.getProcessingTime() + 10);
      return false;
    });
  }


  /** A server on {@code port} over the data directory {@code data}, kept when it stops, so it can be started again. */
  /** A port nothing listens on now, for a server that is stopped and started again on it. */
  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  private static EmbeddedPostgres postgres(int port, Path data) throws Exception {
    return EmbeddedPostgres.builder().setPort(port).setDataDirectory(data).setCleanDataDirectory(false)
        .setServerConfig("wal_level", "logical").start();
  }

  /** Inserts the fences, each an id and the WKT of its geometry. */
  private static void writeFences(Connection db, String[][] fences) throws Exception {
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
      for (String[] fence : fences) {
        insert.setString(1, fence[0]);
        insert.setBytes(2, new WKBWriter().write(new WKTReader().read(fence[1])));
        insert.execute();
      }
    }
  }

  /** An operator that writes its fences in a format this release cannot read: restoring it rebuilds. */
  private static FenceIndexOperator writingAnUnknownFormat() {
    return new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB).writing(new FenceIndexState.Writing((byte) 9, false));
  }

  /** The operator, its source of truth the test's server, streaming from {@code slot}. */
  private static FenceIndexOperator operator(int port, String slot) {
    return new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB, options(port, slot), null);
  }

  private static FenceSourceOptions options(int port, String slot) {
    return FenceSourceOptions.builder()
        .url("jdbc:postgresql://localhost:" + port + "/postgres").username("postgres").password("").slotName(slot).build();
  }

  /** What the operator tells its coordinator, as it comes: the change stream's starts it asks for, and that it reads. */
  private record Told(List<StreamStartEvent> streamStarts, AtomicInteger reading) {}

  private static Told told(FenceIndexOperator operator) {
    Told told = new Told(new CopyOnWriteArrayList<>(), new AtomicInteger());
    operator.reportTo(event -> {
      if (event instanceof StreamStartEvent start) {
        told.streamStarts().add(start);
      } else if (event instanceof ReadingEvent) {
        told.reading().incrementAndGet();
      }
    });
    return told;
  }

  /**
   * Once the subtask has told its coordinator that it reads or loads, and while its read waits for
   * the slot (none begun, the stream not asked for), tells it, as the coordinator does, that the
   * slot is ready.
   */
  private static void slotReady(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness,
      FenceIndexOperator operator, Told told) throws Exception {
    advanceUntil(harness, () -> told.reading().get() == 1, "the subtask to say it reads");
    assertThat(operator.view().recovering()).as("no read before the slot is ready").isFalse();
    assertThat(told.streamStarts()).isEmpty();
    operator.handleOperatorEvent(new SlotReadyEvent());
  }

  /**
   * The stream is not held for an outage (a replay can take it, and a read tried again merges with
   * it), but a load's emptied index would take its edits of fences not yet read again as seq gaps:
   * it waits for the load.
   */
  private static void assertStreamAskedForWhileTheSourceIsOut(CatchUp path, List<StreamStartEvent> starts) {
    assertThat(starts).as("the change stream asked for while the source is out")
        .isEqualTo(path == CatchUp.LOAD ? List.of() : List.of(new StreamStartEvent(0)));
  }

  /** Once the read tried again is done: the stream asked for once, by a load from where it read. */
  private static void assertStreamAskedForOnce(CatchUp path, List<StreamStartEvent> starts) {
    assertThat(starts).as("the change stream asked for").singleElement()
        .satisfies(start -> assertThat(start.streamFrom() > 0).as("from the load's position").isEqualTo(path == CatchUp.LOAD));
  }

  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(
      FenceIndexOperator operator) throws Exception {
    return new KeyedTwoInputStreamOperatorTestHarness<>(operator,
        (FenceChange c) -> c.kind == FenceChange.Kind.FENCE ? new FenceKey(c.fenceId) : FenceKey.ofBucket(c.bucket),
        null, TypeInformation.of(FenceKey.class), 128, 1, 0);
  }

  /** The stream's heartbeat, as the job fans it out: one copy per key group. */
  private static void heartbeat(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness,
      long lsn, long commitTime) throws Exception {
    FenceChange beat = new FenceChange();
    beat.kind = FenceChange.Kind.HEARTBEAT;
    beat.lsn = lsn;
    beat.commitTime = commitTime;
    for (int g = 0; g < 128; g++) {
      harness.processElement1(beat.copyForKeyGroup(g), commitTime);
    }
  }

  private static List<HydrationEpisode> episodes(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    List<HydrationEpisode> rows = new ArrayList<>();
    if (h.getSideOutput(FenceIndexOperator.HYDRATION_EPISODES) != null) {
      for (StreamRecord<HydrationEpisode> r : h.getSideOutput(FenceIndexOperator.HYDRATION_EPISODES)) {
        rows.add(r.getValue());
      }
    }
    return rows;
  }
}
