package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.CatchUpChoice;
import dev.geofence.state.readiness.Readiness;
import java.sql.Connection;
import java.sql.SQLException;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Before a restore reads its fences: whether the catch-up will load them anew (design: "A long
 * pause that loads"), in which case reading them would be wasted, since the load sets them aside.
 * It estimates as the gap check will ({@link CatchUpChoice}), from the restored bucket versions
 * and the source's as they are now; a load forced by the configuration needs no question. A source
 * that does not answer leaves the choice to the gap check, and every fence is read.
 */
final class CatchUpProbe {

  private static final Logger LOG = LoggerFactory.getLogger(CatchUpProbe.class);

  private final FenceSourceOptions source;
  private final WarmUp.CatchUpRule rule;
  private final int maxParallelism;
  private final KeyGroupRange own;

  CatchUpProbe(FenceSourceOptions source, WarmUp.CatchUpRule rule, int maxParallelism, KeyGroupRange own) {
    this.source = source;
    this.rule = rule;
    this.maxParallelism = maxParallelism;
    this.own = own;
  }

  /**
   * Why the catch-up will load, or null if it may take another path.
   *
   * @param readiness knows the restored bucket versions
   * @param fences the live fences the restored fingerprints count
   */
  String loads(Readiness readiness, long fences) {
    if (rule.mode() != CatchUp.AUTO) {
      return rule.mode() == CatchUp.LOAD ? CatchUp.LOAD.label() + " forced by the configuration" : null;
    }
    CatchUpChoice.Decision decision;
    try (Connection db = SourceOfTruth.connect(source, "geofence-catch-up-probe")) {
      SlotProbe.BucketStats stats = SlotProbe.bucketStats(db, source.columns(), maxParallelism, own.getStartKeyGroup(),
          own.getEndKeyGroup());
      decision = CatchUpChoice.choose(CatchUp.AUTO, readiness.backlogTo(stats.versions()), fences, stats.fenceCount(),
          rule.parallelism(), rule.locationsReplayDowntime());
    } catch (SQLException e) {
      LOG.info("The source did not answer before the restore read the fences ({}); the gap check chooses how to catch up",
          e.getMessage());
      return null;
    }
    return decision.path() == CatchUp.LOAD ? decision.reason() : null;
  }
}
