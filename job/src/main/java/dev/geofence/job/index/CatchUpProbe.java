package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.CatchUpChoice;
import dev.geofence.state.readiness.Readiness;
import java.sql.Connection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Before a restore reads its fences: whether the catch-up will load them anew (design: "Chosen
 * before the fences are read"), in which case reading them would be wasted, since the load sets
 * them aside. It estimates as the gap check will ({@link CatchUpChoice}), from the restored bucket
 * versions and the source's, asked for on a thread of its own as soon as a restoring subtask
 * starts, so that the question (and loading the database driver) runs while Flink restores the
 * state's files; a fresh start asks nothing. A load forced by the configuration needs no
 * question. A source that does not answer by the time the fences are to be read leaves the choice
 * to the gap check, and every fence is read.
 */
final class CatchUpProbe {

  private static final Logger LOG = LoggerFactory.getLogger(CatchUpProbe.class);

  /** How long the restore waits for the source's answer once it needs it; Flink's restore of the files came first. */
  static final long PATIENCE_MS = 2_000;

  private final CatchUp mode;
  private final int parallelism;
  private final boolean locationsReplayDowntime;
  /** The source's bucket versions and fence counts, asked for at once; null unless the mode is {@link CatchUp#AUTO}. */
  private final CompletableFuture<SlotProbe.BucketStats> stats;

  private CatchUpProbe(CatchUp mode, int parallelism, boolean locationsReplayDowntime, CompletableFuture<SlotProbe.BucketStats> stats) {
    this.mode = mode;
    this.parallelism = parallelism;
    this.locationsReplayDowntime = locationsReplayDowntime;
    this.stats = stats;
  }

  /**
   * Asks the source for the versions of the buckets of {@code own}, if the mode needs them, on a
   * daemon thread that ends with the answer (or the connection's timeouts).
   */
  static CatchUpProbe ask(FenceSourceOptions source, CatchUp mode, int parallelism, boolean locationsReplayDowntime,
      int maxParallelism, KeyGroupRange own, String threadName) {
    CompletableFuture<SlotProbe.BucketStats> stats = null;
    if (mode == CatchUp.AUTO) {
      CompletableFuture<SlotProbe.BucketStats> answer = new CompletableFuture<>();
      Thread thread = new Thread(() -> {
        try (Connection db = SourceOfTruth.connect(source, "geofence-catch-up-probe")) {
          answer.complete(SlotProbe.bucketStats(db, source.columns(), maxParallelism, own.getStartKeyGroup(), own.getEndKeyGroup()));
        } catch (Exception | LinkageError e) {
          answer.completeExceptionally(e);
        }
      }, threadName);
      thread.setDaemon(true);
      thread.start();
      stats = answer;
    }
    return new CatchUpProbe(mode, parallelism, locationsReplayDowntime, stats);
  }

  /**
   * Why the catch-up will load, or null if it may take another path.
   *
   * @param readiness knows the restored bucket versions
   * @param fences the live fences the restored fingerprints count
   */
  String loads(Readiness readiness, long fences) throws InterruptedException {
    if (mode != CatchUp.AUTO) {
      return mode == CatchUp.LOAD ? CatchUpChoice.forced(mode) : null;
    }
    SlotProbe.BucketStats source;
    try {
      source = stats.get(PATIENCE_MS, TimeUnit.MILLISECONDS);
    } catch (ExecutionException | TimeoutException e) {
      LOG.info("The source did not answer before the restore read the fences ({}); the gap check chooses how to catch up",
          e instanceof ExecutionException ? e.getCause().getMessage() : "no answer within " + PATIENCE_MS + " ms");
      return null;
    }
    CatchUpChoice.Decision decision = CatchUpChoice.choose(CatchUp.AUTO, readiness.backlogTo(source.versions()), fences,
        source.fenceCount(), parallelism, locationsReplayDowntime);
    return decision.path() == CatchUp.LOAD ? decision.reason() : null;
  }
}
