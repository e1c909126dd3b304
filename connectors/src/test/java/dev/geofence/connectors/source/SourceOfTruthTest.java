package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.geofence.connectors.cdc.FenceDecoder;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The warm-up's steps against a real PostgreSQL, on their own thread, their outcomes on the task's. */
class SourceOfTruthTest {

  /**
   * A step that fails by a fault of its own code (not the database's) reaches the task's thread as
   * that exception, which fails the task: on the step's thread it ended the step with no outcome,
   * and the warm-up waited for ever. The fault here is a read of what changed given no held fences.
   */
  @Test
  void aStepsOwnFaultFailsTheTaskInsteadOfEndingWithNoOutcome() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      FenceSourceOptions options = FenceSourceOptions.builder().url(pg.getJdbcUrl("postgres", "postgres")).username("postgres")
          .password("").slotName("unused").build();
      BlockingQueue<SourceOfTruth.Action> mailbox = new LinkedBlockingQueue<>();
      SourceOfTruth source = new SourceOfTruth(options, new FenceDecoder(GeometryReadOptions.defaults(), GeometryFormat.WKB), 128, 0,
          127, (action, what) -> mailbox.add(action), new NoOutcomes(), "source-of-truth-test");
      try {
        source.readChanged(null, 0, false);
        SourceOfTruth.Action failed = mailbox.poll(30, TimeUnit.SECONDS);
        assertThat(failed).as("what the task's thread is given").isNotNull();
        assertThat(catchThrowable(failed::run)).isInstanceOf(NullPointerException.class);
      } finally {
        source.close();
      }
    }
  }

  /** Outcomes none of which this test expects. */
  private static final class NoOutcomes implements SourceOfTruth.Outcomes {
    @Override
    public void checked(SourceOfTruth.Verdict verdict) {
      throw new AssertionError("checked");
    }

    @Override
    public void rows(List<SourceOfTruth.Row> rows) {
      throw new AssertionError("rows");
    }

    @Override
    public void read(BucketRead.Result result) {
      throw new AssertionError("read");
    }

    @Override
    public void readChanged(ChangedRead.Result result) {
      throw new AssertionError("readChanged");
    }

    @Override
    public void unreachable(String reason) {
      throw new AssertionError("unreachable: " + reason);
    }
  }
}
