package dev.geofence.bench;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.io.WKBWriter;

/**
 * A fence change stream without a database, as the CDC source would deliver it, for measuring
 * the fence index's state alone: element {@code i < n} is the snapshot read of fence {@code f-i}
 * (a 96-vertex polygon somewhere in a square that keeps about one fence over each point), the next
 * 4,096 are every bucket's fingerprint, and after them come stream edits at a steady rate, each a
 * new version of one fence followed by its bucket's new fingerprint (count, checksum, version + 1),
 * exactly as {@code fence-versioning.sql} delivers them. Every element is a function of its index,
 * so a restored generator goes on where the savepoint left it and the fingerprints stay true.
 */
final class BenchFences {

  static final int VERTICES = 96;

  private BenchFences() {}

  static DataGeneratorSource<FenceChange> source(int fences, double editsPerSecond) {
    return new DataGeneratorSource<>(new Changes(fences, editsPerSecond), Long.MAX_VALUE, RateLimiterStrategy.noOp(),
        TypeInformation.of(FenceChange.class));
  }

  static String id(int i) {
    return "f-" + i;
  }

  /** The generator function; per-bucket checksums and versions are replayed up to where it starts. */
  private static final class Changes implements GeneratorFunction<Long, FenceChange> {
    private static final long serialVersionUID = 1L;
    /** Edits visit fences in this stride, coprime with any fence count it is used with. */
    private static final long STRIDE = 7_919;

    private final int fences;
    private final double editsPerSecond;
    private transient long nextEditDue;
    private transient long lastCommit;
    private transient long[] baseChecksum;
    private transient long[] checksum;
    private transient long[] count;
    private transient long[] version;
    private transient long replayedEdits;
    private transient double side;

    Changes(int fences, double editsPerSecond) {
      if (fences % STRIDE == 0) {
        throw new IllegalArgumentException("the fence count must not be a multiple of " + STRIDE);
      }
      this.fences = fences;
      this.editsPerSecond = editsPerSecond;
    }

    @Override
    public void open(SourceReaderContext context) {
      baseChecksum = new long[FenceBuckets.COUNT];
      count = new long[FenceBuckets.COUNT];
      for (int i = 0; i < fences; i++) {
        int b = FenceBuckets.of(id(i));
        baseChecksum[b] ^= FenceChecksum.hash(id(i), 1);
        count[b]++;
      }
      checksum = baseChecksum.clone();
      version = new long[FenceBuckets.COUNT];
      Arrays.fill(version, 1);
      side = side(fences);
    }

    @Override
    public FenceChange map(Long index) throws InterruptedException {
      long i = index;
      if (i < fences) {
        return fence((int) i, 1, true, 0, 0);
      }
      if (i < fences + (long) FenceBuckets.COUNT) {
        return stats((int) (i - fences), true, 0, 0);
      }
      long k = i - fences - FenceBuckets.COUNT;
      long edit = k / 2;
      while (replayedEdits < edit) {
        apply(replayedEdits++);
      }
      int target = target(edit);
      long seq = 2 + edit / fences;
      if (k % 2 == 0) {
        // The edits' pace, kept here since the generator's own limiter restarts with a restore.
        long wait = nextEditDue - System.currentTimeMillis();
        if (wait > 0) {
          Thread.sleep(wait);
        }
        nextEditDue = Math.max(nextEditDue, System.currentTimeMillis()) + (long) (1000 / editsPerSecond);
        lastCommit = System.currentTimeMillis();
        return fence(target, seq, false, edit + 1, lastCommit);
      }
      // The same transaction: the edit's commit time.
      apply(edit);
      replayedEdits = edit + 1;
      return stats(FenceBuckets.of(id(target)), false, edit + 1, lastCommit);
    }

    private int target(long edit) {
      return (int) ((edit * STRIDE) % fences);
    }

    private void apply(long edit) {
      int target = target(edit);
      long seq = 2 + edit / fences;
      int b = FenceBuckets.of(id(target));
      checksum[b] ^= FenceChecksum.hash(id(target), seq - 1) ^ FenceChecksum.hash(id(target), seq);
      version[b]++;
    }

    private FenceChange fence(int i, long seq, boolean snapshot, long lsn, long commitTime) {
      FenceChange c = new FenceChange();
      c.kind = FenceChange.Kind.FENCE;
      c.fenceId = id(i);
      c.seq = seq;
      c.geometryBytes = polygon(i, seq);
      c.snapshot = snapshot;
      c.lsn = lsn;
      c.commitTime = commitTime;
      return c;
    }

    private FenceChange stats(int bucket, boolean snapshot, long lsn, long commitTime) {
      FenceChange c = new FenceChange();
      c.kind = FenceChange.Kind.BUCKET_STATS;
      c.bucket = bucket;
      c.fenceCount = count[bucket];
      c.checksum = checksum[bucket];
      c.seq = version[bucket];
      c.snapshot = snapshot;
      c.lsn = lsn;
      c.commitTime = commitTime;
      return c;
    }

    private byte[] polygon(int i, long seq) {
      double[] xy = ring(i, seq, side);
      Coordinate[] ring = new Coordinate[xy.length / 2];
      for (int v = 0; v < ring.length; v++) {
        ring[v] = new Coordinate(xy[2 * v], xy[2 * v + 1]);
      }
      return new WKBWriter().write(new GeometryFactory().createPolygon(ring));
    }
  }

  /** The side of the square that keeps about one of {@code fences} fences over each point. */
  static double side(int fences) {
    // Polygons of radius up to 0.02 degrees.
    return Math.sqrt(fences * Math.PI * 0.00014);
  }

  /**
   * Fence i at version seq, as a closed ring's interleaved coordinates: a star of {@link
   * #VERTICES} vertices in a square of this side; each version moved a little.
   */
  static double[] ring(int i, long seq, double side) {
    SplittableRandom random = new SplittableRandom(i);
    double cx = random.nextDouble() * side + seq * 1e-5;
    double cy = random.nextDouble() * side;
    double radius = 0.002 + random.nextDouble() * 0.018;
    double[] xy = new double[2 * (VERTICES + 1)];
    for (int v = 0; v < VERTICES; v++) {
      double angle = 2 * Math.PI * (v + 0.8 * random.nextDouble()) / VERTICES;
      double r = radius * (0.5 + 0.5 * random.nextDouble());
      xy[2 * v] = cx + r * Math.cos(angle);
      xy[2 * v + 1] = cy + r * Math.sin(angle);
    }
    xy[2 * VERTICES] = xy[0];
    xy[2 * VERTICES + 1] = xy[1];
    return xy;
  }
}
