package dev.geofence.state.geom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.geom.BadGeometryException.Reason;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.io.ByteOrderValues;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;

class FenceGeometryReaderTest {

  private static final String SQUARE_WITH_HOLE =
      "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (4 4, 6 4, 6 6, 4 6, 4 4))";
  private static final String BOW_TIE = "POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))";

  private final FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());

  /**
   * Collections nested a hundred thousand deep overflowed JTS's recursive readers, an Error that
   * failed the task on every replay of the edit: a typed refusal instead, in each format.
   */
  @Test
  void collectionsNestedTooDeeplyAreRefusedNotAFailure() throws Exception {
    int depth = 100_000;
    String wkt = "GEOMETRYCOLLECTION(".repeat(depth) + "POINT(1 1)" + ")".repeat(depth);
    ByteBuffer wkb = ByteBuffer.allocate(depth * 9 + 21).order(ByteOrder.BIG_ENDIAN);
    for (int i = 0; i < depth; i++) {
      wkb.put((byte) 0).putInt(7).putInt(1);
    }
    wkb.put((byte) 0).putInt(1).putDouble(1).putDouble(1);
    String geoJson = "{\"type\":\"GeometryCollection\",\"geometries\":[".repeat(depth)
        + "{\"type\":\"Point\",\"coordinates\":[1,1]}" + "]}".repeat(depth);
    assertThatThrownBy(() -> reader.readWkt(wkt)).isInstanceOf(BadGeometryException.class)
        .hasMessageContaining("nested too deeply").extracting(e -> ((BadGeometryException) e).reason()).isEqualTo(Reason.UNPARSEABLE);
    assertThatThrownBy(() -> reader.readWkb(wkb.array())).isInstanceOf(BadGeometryException.class)
        .hasMessageContaining("nested too deeply");
    assertThatThrownBy(() -> reader.readGeoJson(geoJson)).isInstanceOf(BadGeometryException.class);
    assertThat(reader.readWkt(SQUARE_WITH_HOLE).geometry()).as("the reader reads on after one").isNotNull();
  }

  @Test
  void everyFormatReadsTheSameFence() throws Exception {
    Geometry jts = new WKTReader().read(SQUARE_WITH_HOLE);
    jts.setSRID(4326);
    FenceGeometry fromWkt = reader.readWkt(SQUARE_WITH_HOLE).geometry();
    FenceGeometry fromEwkt = reader.readWkt("SRID=4326;" + SQUARE_WITH_HOLE).geometry();
    FenceGeometry fromWkb = reader.readWkb(new WKBWriter().write(jts)).geometry();
    FenceGeometry fromEwkb = reader.readWkb(new WKBWriter(2, ByteOrderValues.LITTLE_ENDIAN, true).write(jts)).geometry();
    FenceGeometry fromWkbZ = reader.readWkb(new WKBWriter(3).write(new WKTReader().read(
        "POLYGON Z ((0 0 5, 10 0 5, 10 10 5, 0 10 5, 0 0 5), (4 4 1, 6 4 1, 6 6 1, 4 6 1, 4 4 1))"))).geometry();
    FenceGeometry fromGeoJson =
        reader.readGeoJson(
                "{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[10,0],[10,10],[0,10],[0,0]],"
                    + "[[4,4],[6,4],[6,6],[4,6],[4,4]]]}")
            .geometry();
    assertThat(fromEwkt).isEqualTo(fromWkt);
    assertThat(fromWkb).isEqualTo(fromWkt);
    assertThat(fromEwkb).isEqualTo(fromWkt);
    assertThat(fromWkbZ).isEqualTo(fromWkt);
    assertThat(fromGeoJson).isEqualTo(fromWkt);
    String geoJson = "{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[10,0],[10,10],[0,10],[0,0]],[[4,4],[6,4],[6,6],[4,6],[4,4]]]}";
    assertThat(reader.readText(geoJson, GeometryFormat.GEOJSON).geometry()).as("a GeoJSON text column").isEqualTo(fromWkt);
    assertThat(reader.readText("SRID=4326;" + SQUARE_WITH_HOLE, GeometryFormat.WKT).geometry()).as("a WKT text column").isEqualTo(fromWkt);
    assertThatThrownBy(() -> reader.readText(geoJson, GeometryFormat.WKT)).as("GeoJSON read as WKT")
        .isInstanceOfSatisfying(BadGeometryException.class, e -> assertThat(e.reason()).isEqualTo(Reason.UNPARSEABLE));
    assertThat(fromWkt.ringCount()).isEqualTo(2);
    assertThat(fromWkt.polygonStarts()).as("one polygon of both rings").containsExactly(0, 2);
    // As keyed state and snapshot files store it: a polygon with a hole once came back as corrupt.
    assertThat(FenceGeometry.fromArrays(fromWkt.coordinates(), fromWkt.ringStarts(), fromWkt.polygonStarts())).isEqualTo(fromWkt);
    assertThat(fromWkt.vertexCount()).isEqualTo(10);
    assertThat(fromWkt.covers(5, 5)).as("inside the hole").isFalse();
    assertThat(fromWkt.covers(4, 5)).as("on the hole's boundary").isTrue();
    assertThat(fromWkt.covers(2, 2)).isTrue();
    assertThat(fromWkt.covers(10, 10)).as("on a shell vertex").isTrue();
  }

  @Test
  void multiPolygonKeepsItsParts() throws Exception {
    FenceGeometry fence =
        reader.readWkt("MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), EMPTY, ((5 5, 6 5, 6 6, 5 5)))").geometry();
    assertThat(fence.polygonCount()).isEqualTo(2);
    assertThat(fence.covers(0.9, 0.5)).isTrue();
    assertThat(fence.covers(5.9, 5.5)).isTrue();
    assertThat(fence.covers(3, 3)).isFalse();
    assertThat(FenceGeometry.fromArrays(fence.coordinates(), fence.ringStarts(), fence.polygonStarts()))
        .isEqualTo(fence);
  }

  @ParameterizedTest(name = "{0}: {1}")
  @CsvSource(
      delimiter = '|',
      value = {
        "UNPARSEABLE             | POLYGON ((0 0, 1",
        "UNPARSEABLE             | hello",
        "EMPTY                   | POLYGON EMPTY",
        "EMPTY                   | MULTIPOLYGON EMPTY",
        "NOT_AREAL               | POINT (1 2)",
        "NOT_AREAL               | LINESTRING (0 0, 1 1)",
        "NOT_AREAL               | GEOMETRYCOLLECTION (POLYGON ((0 0, 1 0, 1 1, 0 0)))",
        "NON_FINITE_COORDINATE   | POLYGON ((0 0, NaN 1, 1 1, 0 0))",
        "OUT_OF_RANGE_COORDINATE | POLYGON ((179 0, 181 0, 180 1, 179 0))",
        "OUT_OF_RANGE_COORDINATE | POLYGON ((0 -89, 1 -91, 1 -89, 0 -89))",
        "UNSUPPORTED_SRID        | SRID=3857;POLYGON ((0 0, 1 0, 1 1, 0 0))",
        "RING_TOO_SHORT          | POLYGON ((0 0, 1 1, 0 0))",
        "RING_NOT_CLOSED         | POLYGON ((0 0, 1 0, 1 1, 0 1))",
        "INVALID_POLYGON         | POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))",
        "INVALID_POLYGON         | MULTIPOLYGON (((0 0, 2 0, 2 2, 0 0)), ((1 0, 3 0, 3 2, 1 0)))",
        "INVALID_POLYGON         | POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (20 20, 21 20, 21 21, 20 20))",
      })
  void eachBadWktHasItsTypedReason(Reason reason, String wkt) {
    FenceGeometryReader rejecting =
        new FenceGeometryReader(GeometryReadOptions.builder().invalidPolicy(InvalidPolygonPolicy.REJECT).build());
    assertThatThrownBy(() -> rejecting.readWkt(wkt))
        .isInstanceOfSatisfying(BadGeometryException.class, e -> assertThat(e.reason()).isEqualTo(reason))
        .hasMessageStartingWith(reason.name() + ": ");
  }

  @Test
  void badWkbRingsAreNamedNotQuietlyFixed() {
    // JTS's WKBReader would close this ring and pad that one without a word.
    assertThatThrownBy(() -> reader.readWkb(polygonWkb(0, 0, 1, 0, 1, 1, 0, 1)))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.RING_NOT_CLOSED));
    assertThatThrownBy(() -> reader.readWkb(polygonWkb(0, 0, 1, 1, 0, 0)))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.RING_TOO_SHORT));
    assertThatThrownBy(() -> reader.readWkb(polygonWkb(Double.NaN, 0, 1, 0, 1, 1, Double.NaN, 0)))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.NON_FINITE_COORDINATE));
    assertThatThrownBy(() -> reader.readWkb(polygonWkb(0, 0, Double.POSITIVE_INFINITY, 0, 1, 1, 0, 0)))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.NON_FINITE_COORDINATE));
    assertThatThrownBy(() -> reader.readWkb(new byte[] {1, 3, 0, 0}))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.UNPARSEABLE));
    assertThatThrownBy(() -> reader.readWkb(new byte[0]))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.UNPARSEABLE));
  }

  @Test
  void ewkbWithAForeignSridIsRefused() throws Exception {
    Geometry jts = new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 0))");
    jts.setSRID(3857);
    assertThatThrownBy(() -> reader.readWkb(new WKBWriter(2, true).write(jts)))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.UNSUPPORTED_SRID));
  }

  @Test
  void badGeoJsonHasItsTypedReason() {
    assertThatThrownBy(() -> reader.readGeoJson("{\"type\":\"Polygon\""))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.UNPARSEABLE));
    assertThatThrownBy(() -> reader.readGeoJson("{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[1,0],[1,1],[0,1]]]}"))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.RING_NOT_CLOSED));
    assertThatThrownBy(() -> reader.readGeoJson("{\"type\":\"Point\",\"coordinates\":[0,0]}"))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.NOT_AREAL));
    assertThatThrownBy(() -> reader.readGeoJson(" "))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.UNPARSEABLE));
  }

  @Test
  void vertexCapIsEnforced() {
    FenceGeometryReader capped = new FenceGeometryReader(GeometryReadOptions.builder().maxVertices(5).build());
    assertThatThrownBy(() -> capped.readWkt("POLYGON ((0 0, 1 0, 2 0, 2 1, 1 2, 0 0))"))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.TOO_MANY_VERTICES))
        .hasMessageContaining("6 vertices exceed the cap of 5");
    assertThatThrownBy(() -> GeometryReadOptions.builder().maxVertices(3).build())
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void bowTieIsRepairedWithAWarningByDefault() throws Exception {
    DecodedGeometry decoded = reader.readWkt(BOW_TIE);
    assertThat(decoded.repair()).hasValueSatisfying(note -> assertThat(note).contains("Self-intersection"));
    FenceGeometry fence = decoded.geometry();
    assertThat(fence.polygonCount()).isEqualTo(2);
    assertThat(fence.covers(0.1, 0.5)).isTrue();
    assertThat(fence.covers(0.9, 0.5)).isTrue();
    assertThat(fence.covers(0.5, 0.1)).isFalse();
    assertThat(reader.readWkt(SQUARE_WITH_HOLE).repair()).isEmpty();
  }

  @Test
  void collapsedPolygonCannotBeRepaired() {
    assertThatThrownBy(() -> reader.readWkt("POLYGON ((0 0, 1 1, 2 2, 0 0))"))
        .satisfies(e -> assertThat(((BadGeometryException) e).reason()).isEqualTo(Reason.UNREPAIRABLE));
  }

  @Test
  void corruptArraysAreRefused() {
    assertThatThrownBy(() -> FenceGeometry.fromArrays(new double[] {0, 0, 1, 0, 1, 1, 0, 1}, new int[] {0, 4}, new int[] {0, 1}))
        .hasMessageContaining("not closed");
    assertThatThrownBy(() -> FenceGeometry.fromArrays(new double[] {0, 0, 1, 0, 0, 0}, new int[] {0, 3}, new int[] {0, 1}))
        .hasMessageContaining("fewer than 4");
    assertThatThrownBy(() -> FenceGeometry.fromArrays(new double[8], new int[] {0, 3}, new int[] {0, 1}))
        .hasMessageContaining("do not cover");
  }

  /** Little-endian WKB of a one-ring polygon, written by hand so that it can be malformed. */
  private static byte[] polygonWkb(double... xy) {
    ByteBuffer b = ByteBuffer.allocate(1 + 4 + 4 + 4 + 8 * xy.length).order(ByteOrder.LITTLE_ENDIAN);
    b.put((byte) 1).putInt(3).putInt(1).putInt(xy.length / 2);
    for (double v : xy) {
      b.putDouble(v);
    }
    return b.array();
  }
}
