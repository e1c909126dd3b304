package dev.geofence.state.segment;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.geom.CoverageGrid;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.shape.Shapes;
import dev.geofence.state.time.StayRules;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.prep.PreparedGeometry;
import org.locationtech.jts.geom.prep.PreparedGeometryFactory;
import org.locationtech.jts.geom.util.GeometryFixer;
import org.locationtech.jts.io.WKBWriter;

/**
 * A segment read back holds exactly the fences written (against the stored versions themselves),
 * answers containment in place as JTS {@code covers} does on generated shapes of every kind, and
 * refuses damaged bytes rather than misreading them.
 */
class FenceSegmentTest {

  private final GeometryFactory factory = new GeometryFactory();
  private final FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());

  @Test
  void readsBackEveryFenceAsWrittenAndFindsItById() throws Exception {
    Map<String, StoredFence> fences = fences(new Shapes(factory, 20261205L), 1_500, new HashMap<>());
    FenceSegment segment = FenceSegment.read(StoredFence.segment(fences));

    assertThat(segment.size()).isEqualTo(fences.size());
    FenceChecksum expected = new FenceChecksum();
    fences.forEach((id, f) -> {
      if (!f.deleted()) {
        expected.add(id, f.seq());
      }
    });
    assertThat(segment.liveCount()).isEqualTo(expected.count());
    assertThat(segment.checksum()).isEqualTo(expected.checksum());
    Map<String, StoredFence> read = new HashMap<>();
    for (int i = 0; i < segment.size(); i++) {
      assertThat(segment.positionOf(segment.id(i))).isEqualTo(i);
      read.put(segment.id(i), StoredFence.of(segment, i));
    }
    assertThat(read).isEqualTo(fences);
    assertThat(segment.positionOf("no such fence")).isEqualTo(-1);
    // Behind another segment in a shared arena: its rings point past the other's coordinates.
    CoordinateArena arena = new CoordinateArena();
    FenceSegment.read(StoredFence.segment(fences(new Shapes(factory, 1L), 50, new HashMap<>())), arena);
    FenceSegment second = FenceSegment.read(StoredFence.segment(fences), arena);
    Map<String, StoredFence> readFromArena = new HashMap<>();
    for (int i = 0; i < second.size(); i++) {
      readFromArena.put(second.id(i), StoredFence.of(second, i));
    }
    assertThat(readFromArena).isEqualTo(fences);
    assertThat(segment.positionOf("f-1\u00e9")).isGreaterThanOrEqualTo(0);
  }

  @Test
  void equalContentsGiveEqualBytesWhateverTheOrderGiven() throws Exception {
    Map<String, StoredFence> fences = fences(new Shapes(factory, 7L), 200, new HashMap<>());
    List<String> ids = new ArrayList<>(fences.keySet());
    Collections.shuffle(ids, new java.util.Random(3));
    Map<String, StoredFence> shuffled = new LinkedHashMap<>();
    ids.forEach(id -> shuffled.put(id, fences.get(id)));
    assertThat(StoredFence.segment(shuffled)).isEqualTo(StoredFence.segment(fences));
  }

  @Test
  void coversInPlaceAsJtsDoes() throws Exception {
    Shapes shapes = new Shapes(factory, 20261206L);
    Map<String, Geometry> oracleShapes = new HashMap<>();
    Map<String, StoredFence> fences = fences(shapes, 3_000, oracleShapes);
    CoordinateArena arena = new CoordinateArena();
    FenceSegment.read(StoredFence.segment(fences(new Shapes(factory, 2L), 50, new HashMap<>())), arena);
    FenceSegment segment = FenceSegment.read(StoredFence.segment(fences), arena);
    List<String> differences = new ArrayList<>();
    int pairs = 0;
    int covered = 0;
    for (int i = 0; i < segment.size(); i++) {
      Geometry shape = oracleShapes.get(segment.id(i));
      if (shape == null) {
        continue;
      }
      PreparedGeometry oracle = PreparedGeometryFactory.prepare(shape);
      for (Coordinate p : shapes.probes(shape, 8)) {
        boolean expected = oracle.covers(factory.createPoint(p));
        covered += expected ? 1 : 0;
        pairs++;
        if (coversAsTheIndexAsks(segment, i, p.x, p.y) != expected && differences.size() < 20) {
          differences.add(shape + " POINT (" + p.x + " " + p.y + ") expected " + expected);
        }
      }
    }
    assertThat(differences).as("differences from JTS covers").isEmpty();
    assertThat(pairs).isGreaterThan(20_000);
    assertThat(covered).isBetween(pairs / 5, pairs * 4 / 5);
  }

  @Test
  void readsSegmentsWhereTheyLieInABiggerBuffer() throws Exception {
    // As a file of segments, each its length then its bytes, mapped (a direct buffer, big-endian).
    Map<String, StoredFence> first = fences(new Shapes(factory, 21L), 40, new HashMap<>());
    Map<String, StoredFence> second = fences(new Shapes(factory, 22L), 60, new HashMap<>());
    byte[] a = StoredFence.segment(first);
    byte[] b = StoredFence.segment(second);
    ByteBuffer file = ByteBuffer.allocateDirect(8 + a.length + b.length);
    file.putInt(a.length).put(a).putInt(b.length).put(b).flip();
    CoordinateArena arena = new CoordinateArena();
    for (Map<String, StoredFence> expected : List.of(first, second)) {
      int length = file.getInt();
      FenceSegment segment = FenceSegment.read(file.slice(file.position(), length), arena);
      file.position(file.position() + length);
      Map<String, StoredFence> read = new HashMap<>();
      for (int i = 0; i < segment.size(); i++) {
        read.put(segment.id(i), StoredFence.of(segment, i));
      }
      assertThat(read).isEqualTo(expected);
    }
    ByteBuffer damaged = ByteBuffer.allocateDirect(a.length).put(a).flip();
    damaged.put(a.length - 1, (byte) (a[a.length - 1] ^ 1));
    assertThatThrownBy(() -> FenceSegment.read(damaged, null)).hasMessageContaining("damaged");
  }

  @Test
  void refusesDamagedBytesAndOtherFormats() throws Exception {
    byte[] bytes = StoredFence.segment(fences(new Shapes(factory, 11L), 100, new HashMap<>()));
    SplittableRandom random = new SplittableRandom(5);
    for (int k = 0; k < 50; k++) {
      byte[] damaged = bytes.clone();
      int at = 4 + random.nextInt(bytes.length - 4);
      damaged[at] ^= (byte) (1 << random.nextInt(8));
      assertThatThrownBy(() -> FenceSegment.read(damaged)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("damaged");
    }
    byte[] otherFormat = bytes.clone();
    otherFormat[0] = 5;
    assertThatThrownBy(() -> FenceSegment.read(otherFormat)).hasMessageContaining("format 5");
    assertThatThrownBy(() -> FenceSegment.read(new byte[3])).hasMessageContaining("shorter than its header");
    assertThat(FenceSegment.read(StoredFence.segment(Map.of())).size()).isZero();
  }

  /**
   * A load's segment leaves every grid of a fence worth one for the reader to build, in formats 3
   * and 4, and is otherwise the segment a rewrite writes, byte for byte the same size.
   */
  @Test
  void aSegmentWithUnbuiltGridsDiffersOnlyInItsGrids() throws Exception {
    Map<String, StoredFence> withDelays = fences(new Shapes(factory, 13L), 300, new HashMap<>());
    Map<String, StoredFence> without = withoutDelays(withDelays);
    for (Map<String, StoredFence> fences : List.of(withDelays, without)) {
      byte[] built = StoredFence.segment(fences);
      byte[] unbuilt = StoredFence.segmentWithUnbuiltGrids(fences);
      assertThat(unbuilt[0]).isEqualTo(fences == withDelays ? FenceSegment.FORMAT_UNBUILT_GRIDS : (byte) 3);
      assertThat(unbuilt).hasSameSizeAs(built);
      FenceSegment a = FenceSegment.read(built);
      FenceSegment b = FenceSegment.read(unbuilt);
      assertThat(b.hasDwellDelays()).isEqualTo(fences == withDelays);
      int left = 0;
      long[] builtGrid = new long[CoverageGrid.COARSE_WORDS];
      long[] unbuiltGrid = new long[CoverageGrid.COARSE_WORDS];
      for (int i = 0; i < a.size(); i++) {
        assertThat(b.id(i)).isEqualTo(a.id(i));
        assertThat(StoredFence.of(b, i)).isEqualTo(StoredFence.of(a, i));
        double[] boxA = new double[4];
        double[] boxB = new double[4];
        a.box(i, boxA, 0);
        b.box(i, boxB, 0);
        assertThat(boxB).isEqualTo(boxA);
        a.grid(i, builtGrid, 0);
        b.grid(i, unbuiltGrid, 0);
        FenceGeometry g = fences.get(a.id(i)).geometry();
        if (g != null && g.vertexCount() >= CoverageGrid.MIN_VERTICES) {
          left++;
          assertThat(unbuiltGrid).as("every cell unbuilt").containsOnly(-1L);
        } else {
          assertThat(unbuiltGrid).isEqualTo(builtGrid).containsOnly(0L);
        }
      }
      assertThat(left).isGreaterThan(50).isLessThan(a.size());
    }
  }

  /** The same fences, none with a dwell delay of its own. */
  private static Map<String, StoredFence> withoutDelays(Map<String, StoredFence> fences) {
    Map<String, StoredFence> without = new HashMap<>();
    fences.forEach((id, f) -> without.put(id,
        new StoredFence(f.seq(), f.deleted(), f.geometry(), f.tenant(), StayRules.NO_FENCE_DELAY, f.commitLsn(), f.commitTime())));
    return without;
  }

  /** The stored box, then the stored grid, then the rings in place: what the index reads of a segment's fence. */
  private static boolean coversAsTheIndexAsks(FenceSegment segment, int i, double x, double y) {
    double[] box = new double[4];
    segment.box(i, box, 0);
    if (x < box[0] || x > box[2] || y < box[1] || y > box[3]) {
      return false;
    }
    long[] grid = new long[CoverageGrid.COARSE_WORDS];
    segment.grid(i, grid, 0);
    long mark = CoverageGrid.lookup(grid, 0, CoverageGrid.COARSE, box[0], box[1], box[2], box[3], x, y);
    return mark != 0 ? mark == CoverageGrid.INSIDE : segment.coversExactly(i, x, y);
  }

  @Test
  void segmentsWithoutDwellDelaysKeepTheFormatBeforeThem() throws Exception {
    Map<String, StoredFence> withDelays = fences(new Shapes(factory, 3L), 300, new HashMap<>());
    Map<String, StoredFence> without = withoutDelays(withDelays);
    byte[] newer = StoredFence.segment(withDelays);
    byte[] older = StoredFence.segment(without);

    assertThat(newer[0]).isEqualTo(FenceSegment.FORMAT_VERSION);
    assertThat(older[0]).isEqualTo(FenceSegment.FORMAT_WITHOUT_DELAYS);
    // Format 1 is format 2 less one long per fence: nothing else grew.
    assertThat(newer.length - older.length).isEqualTo(8 * withDelays.size());
    FenceSegment read = FenceSegment.read(newer);
    FenceSegment readOlder = FenceSegment.read(older);
    assertThat(read.hasDwellDelays()).isTrue();
    assertThat(readOlder.hasDwellDelays()).isFalse();
    int own = 0;
    for (int i = 0; i < read.size(); i++) {
      assertThat(read.dwellDelay(i)).isEqualTo(withDelays.get(read.id(i)).dwellDelay());
      assertThat(readOlder.dwellDelay(i)).isEqualTo(StayRules.NO_FENCE_DELAY);
      assertThat(StoredFence.of(readOlder, i)).isEqualTo(without.get(readOlder.id(i)));
      own += read.dwellDelay(i) == StayRules.NO_FENCE_DELAY ? 0 : 1;
    }
    assertThat(own).isGreaterThan(20);
  }

  /**
   * Live fences of every kind, a tenth tombstones, a twentieth refused (no geometry), three tenants
   * and none; a sixth of the live ones with a dwell delay of their own, some of them 0.
   */
  private Map<String, StoredFence> fences(Shapes shapes, int count, Map<String, Geometry> oracle) throws Exception {
    Map<String, StoredFence> fences = new HashMap<>();
    Shapes.Kind[] kinds = Shapes.Kind.values();
    for (int i = 0; i < count; i++) {
      String id = i == 1 ? "f-1\u00e9" : "f-" + i;
      long seq = 1 + shapes.random().nextInt(1_000);
      String tenant = i % 4 == 3 ? null : "tenant-" + (i % 3);
      long lsn = shapes.random().nextLong(1L << 40);
      long time = 1_700_000_000_000L + i;
      if (i % 10 == 9) {
        fences.put(id, new StoredFence(seq, true, null, tenant, StayRules.NO_FENCE_DELAY, lsn, time));
        continue;
      }
      if (i % 20 == 4) {
        fences.put(id, new StoredFence(seq, false, null, tenant, StayRules.NO_FENCE_DELAY, lsn, time));
        continue;
      }
      Geometry shape = shapes.of(kinds[i % kinds.length], -170 + shapes.random().nextDouble() * 340,
          -80 + shapes.random().nextDouble() * 160, Math.pow(10, -4 + 4 * shapes.random().nextDouble()));
      if (!shape.isValid()) {
        shape = GeometryFixer.fix(shape);
        if (shape.isEmpty()) {
          continue;
        }
      }
      FenceGeometry geometry = reader.readWkb(new WKBWriter().write(shape)).geometry();
      oracle.put(id, shape);
      long delay = i % 6 != 5 ? StayRules.NO_FENCE_DELAY : i % 4 == 1 ? 0 : 1_000L * i;
      fences.put(id, new StoredFence(seq, false, geometry, tenant, delay, lsn, time));
    }
    return fences;
  }
}
