package dev.geofence.state.time;

import dev.geofence.state.geom.FenceGeometry;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import org.locationtech.jts.geom.Envelope;
import org.locationtech.jts.index.quadtree.Quadtree;

/**
 * The fence versions no longer in force that a late location may still need
 * (docs/design.md#time-rules): for each fence edited within the allowed lateness, the versions it
 * had before, each with the time it stopped being in force (the commit time of the edit that
 * replaced it). A fence that did not exist, or was deleted, has a version without geometry, so that
 * a late location does not see a fence created after its time and does see one deleted after it.
 *
 * <p>A version ended at time u was in force up to but excluding u (an edit committed at u applies
 * to locations at u). A fence with no versions here has been as it is now for as long as any
 * admitted location can look back. The owner drops versions no admitted location can need any
 * more ({@link #prune}), so the history holds about the edits of one allowed lateness; {@link
 * #versions()} counts them. Versions of one fence arrive in the order of its edits.
 *
 * <p>A location older than many edits (one held while a restore caught up on a backlog) asks only
 * about the fences near it and the ones it names: the versions with a geometry are kept in a JTS
 * {@link Quadtree} by their envelopes, so that the question costs the fences whose shape of then
 * may cover the point, not every fence changed since. Not thread-safe.
 */
public final class FenceHistory {

  /**
   * A version of a fence that is no longer in force: its seq, geometry (null: there was no usable
   * fence), tenant and dwell delay ({@link StayRules#NO_FENCE_DELAY}: the job's), and the time it ended.
   */
  public record Version(long seq, FenceGeometry geometry, String tenant, long dwellDelay, long until) {

    /** Whether this version was a fence that covers the point for {@code tenant} (null: any tenant). */
    public boolean covers(double x, double y, String locationTenant) {
      return geometry != null && (locationTenant == null || locationTenant.equals(tenant)) && geometry.covers(x, y);
    }
  }

  /** A past version of a fence, where the spatial index keeps it. */
  private record Placed(String fenceId, Version version) {}

  /** A version of a fence for the owner's durable copy. */
  public record Kept(String fenceId, Version version) {}

  /**
   * What a checkpoint brings the durable copy to: the versions to write, and the fences whose
   * versions that ended at or before the checkpoint's horizon are to be removed from it.
   */
  public record Checkpoint(List<Kept> write, Set<String> forgetUpToHorizon) {}

  /** When a version held here ends. */
  private record End(long until, String fenceId) {}

  /** Each fence's past versions, oldest first (ascending {@code until}). */
  private final Map<String, List<Version>> byFence = new HashMap<>();
  /** Every past version that has a geometry, by its envelope. */
  private final Quadtree byArea = new Quadtree();
  private long versions;
  /** No fence has changed after this time: a location at or after it needs no history. */
  private long latestChange = Long.MIN_VALUE;
  /** The end of every version held, oldest first (some may be forgotten since): what {@link #pruneUpTo} drops. */
  private final PriorityQueue<End> ends = new PriorityQueue<>(Comparator.comparingLong(End::until));
  /** The versions recorded since the last {@link #checkpoint}, not in the durable copy yet. */
  private final List<End> uncopied = new ArrayList<>();
  /** The end of every version in the durable copy, oldest first: what a checkpoint removes from it. */
  private final PriorityQueue<End> copied = new PriorityQueue<>(Comparator.comparingLong(End::until));

  /**
   * Records that {@code version} of the fence ended at {@code version.until()}. Returns false, and
   * records nothing, when a version of the fence ended at that time or later already: a version
   * replaced at the instant it began was never in force.
   */
  public boolean superseded(String fenceId, Version version) {
    if (!hold(fenceId, version)) {
      return false;
    }
    uncopied.add(new End(version.until(), fenceId));
    return true;
  }

  /**
   * Records a version read back from the durable copy (a restore): as {@link #superseded}, and
   * already in the copy, so that a checkpoint removes it from there once it is pruned.
   */
  public boolean restored(String fenceId, Version version) {
    if (!hold(fenceId, version)) {
      return false;
    }
    copied.add(new End(version.until(), fenceId));
    return true;
  }

  private boolean hold(String fenceId, Version version) {
    List<Version> past = byFence.computeIfAbsent(fenceId, id -> new ArrayList<>(2));
    if (!past.isEmpty() && past.get(past.size() - 1).until() >= version.until()) {
      return false;
    }
    past.add(version);
    place(fenceId, version, true);
    versions++;
    latestChange = Math.max(latestChange, version.until());
    ends.add(new End(version.until(), fenceId));
    return true;
  }

  /**
   * The fence's past is no longer known (a read of the source replaced it): its versions go, here;
   * the owner removes them from its durable copy at once.
   */
  public void forget(String fenceId) {
    List<Version> past = byFence.remove(fenceId);
    if (past != null) {
      versions -= past.size();
      past.forEach(v -> place(fenceId, v, false));
    }
  }

  /** Whether some fence changed after {@code time}, so that a location at it needs {@link #changedAfter}. */
  public boolean anyChangedAfter(long time) {
    return time < latestChange;
  }

  /**
   * The version of the fence in force at {@code time}, if its current version began after it;
   * null if the fence has been as it is now since then.
   */
  public Version versionAt(String fenceId, long time) {
    List<Version> past = byFence.get(fenceId);
    if (past == null || past.get(past.size() - 1).until() <= time) {
      return null;
    }
    for (Version v : past) {
      if (v.until() > time) {
        return v;
      }
    }
    throw new AssertionError("unreachable: the newest version ends after the time");
  }

  /**
   * The fences whose current version began after {@code time} and whose version in force at
   * {@code time} had a geometry with the point in its envelope (so that it may cover the point),
   * each with that version. The map is the caller's to change.
   */
  public Map<String, Version> changedAfterNear(double x, double y, long time) {
    Map<String, Version> near = new HashMap<>();
    if (!anyChangedAfter(time)) {
      return near;
    }
    for (Object item : byArea.query(new Envelope(x, x, y, y))) {
      Placed placed = (Placed) item;
      Version v = placed.version();
      FenceGeometry g = v.geometry();
      if (v.until() > time && g.minX() <= x && x <= g.maxX() && g.minY() <= y && y <= g.maxY()
          && versionAt(placed.fenceId(), time) == v) {
        near.put(placed.fenceId(), v);
      }
    }
    return near;
  }

  /**
   * Whether the fence was deleted after {@code time}: a version without geometry began after it
   * (one of the past ones, or the current one if {@code deletedNow}).
   */
  public boolean deletedAfter(String fenceId, long time, boolean deletedNow) {
    List<Version> past = byFence.get(fenceId);
    if (past == null) {
      return false;
    }
    for (int i = 0; i < past.size(); i++) {
      // Version i + 1 (or the current one) began when version i ended.
      boolean nextIsNoFence = i + 1 < past.size() ? past.get(i + 1).geometry() == null : deletedNow;
      if (past.get(i).until() > time && nextIsNoFence) {
        return true;
      }
    }
    return false;
  }

  /** Drops every version that ended at or before {@code horizon}: no location at or after it can need them. */
  public void pruneUpTo(long horizon) {
    while (!ends.isEmpty() && ends.peek().until() <= horizon) {
      prune(ends.poll().fenceId(), horizon);
    }
  }

  /**
   * What the durable copy needs at a checkpoint whose oldest location still to be evaluated is
   * {@code horizon}: the versions recorded since the last checkpoint that are held and ended after
   * it, and the fences with versions in the copy that ended at or before it. The owner applies both
   * before its state is snapshotted; from then on the written versions count as in the copy.
   */
  public Checkpoint checkpoint(long horizon) {
    List<Kept> write = new ArrayList<>();
    for (End end : uncopied) {
      if (end.until() > horizon) {
        for (Version version : byFence.getOrDefault(end.fenceId(), List.of())) {
          if (version.until() == end.until()) {
            write.add(new Kept(end.fenceId(), version));
            copied.add(end);
          }
        }
      }
    }
    uncopied.clear();
    Set<String> forget = new LinkedHashSet<>();
    while (!copied.isEmpty() && copied.peek().until() <= horizon) {
      forget.add(copied.poll().fenceId());
    }
    return new Checkpoint(write, forget);
  }

  private void prune(String fenceId, long horizon) {
    List<Version> past = byFence.get(fenceId);
    if (past == null) {
      return;
    }
    int drop = 0;
    while (drop < past.size() && past.get(drop).until() <= horizon) {
      drop++;
    }
    List<Version> dropped = past.subList(0, drop);
    dropped.forEach(v -> place(fenceId, v, false));
    dropped.clear();
    versions -= drop;
    if (past.isEmpty()) {
      byFence.remove(fenceId);
    }
  }

  /** The fence's past versions, oldest first. */
  public List<Version> of(String fenceId) {
    return List.copyOf(byFence.getOrDefault(fenceId, List.of()));
  }

  private void place(String fenceId, Version version, boolean in) {
    FenceGeometry g = version.geometry();
    if (g == null) {
      return;
    }
    Envelope envelope = new Envelope(g.minX(), g.maxX(), g.minY(), g.maxY());
    if (in) {
      byArea.insert(envelope, new Placed(fenceId, version));
    } else {
      byArea.remove(envelope, new Placed(fenceId, version));
    }
  }

  /** How many past versions are held, over all fences: the metric of the history's size. */
  public long versions() {
    return versions;
  }
}
