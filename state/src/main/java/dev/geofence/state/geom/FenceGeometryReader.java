package dev.geofence.state.geom;

import dev.geofence.state.geom.BadGeometryException.Reason;
import java.util.Objects;
import java.util.Optional;
import org.locationtech.jts.geom.CoordinateSequence;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.LinearRing;
import org.locationtech.jts.geom.MultiPolygon;
import org.locationtech.jts.geom.Polygon;
import org.locationtech.jts.geom.util.GeometryFixer;
import org.locationtech.jts.io.ParseException;
import org.locationtech.jts.io.WKBReader;
import org.locationtech.jts.io.WKTReader;
import org.locationtech.jts.io.geojson.GeoJsonReader;
import org.locationtech.jts.operation.valid.IsValidOp;
import org.locationtech.jts.operation.valid.TopologyValidationError;

/**
 * Turns a fence geometry as it arrives from the source (EWKB or WKB bytes, WKT or GeoJSON text)
 * into a {@link FenceGeometry}, or refuses it with a {@link BadGeometryException} naming the
 * reason.
 *
 * <p>Checks run cheapest first: parse (through JTS's readers); per ring, finite coordinates, at
 * least 4 points, closed; not empty; areal (Polygon or MultiPolygon); SRID 4326 or none; longitude
 * in [-180, 180] and latitude in [-90, 90]; the vertex cap; finally topological validity
 * ({@link IsValidOp}), where an invalid polygon is repaired with {@link GeometryFixer} or refused
 * according to {@link InvalidPolygonPolicy}. Only 2D is kept: Z and M ordinates are dropped.
 *
 * <p>Not thread-safe (JTS's readers keep parse state): use one reader per thread.
 */
public final class FenceGeometryReader {

  /** PostGIS's SRID for WGS 84 longitude/latitude, the only reference the fences may declare. */
  public static final int WGS84 = 4326;

  private final GeometryReadOptions options;
  private final GeometryFactory factory = new RingCheckingFactory();
  private final WKBReader wkbReader = new WKBReader(factory);
  private final WKTReader wktReader = new WKTReader(factory);
  private final GeoJsonReader geoJsonReader = new GeoJsonReader(factory);

  public FenceGeometryReader(GeometryReadOptions options) {
    this.options = Objects.requireNonNull(options, "options");
  }

  /** Reads WKB or PostGIS EWKB (the SRID, Z and M flags are understood). */
  public DecodedGeometry readWkb(byte[] wkb) throws BadGeometryException {
    if (wkb == null || wkb.length == 0) {
      throw new BadGeometryException(Reason.UNPARSEABLE, "no WKB bytes");
    }
    try {
      // JTS's WKB reader quietly closes open rings and pads short ones; refuse them first instead.
      WkbRingCheck.check(wkb);
      return accept(wkbReader.read(wkb));
    } catch (ParseException | RuntimeException e) {
      throw unparseable("WKB", e);
    } catch (StackOverflowError e) {
      throw nestedTooDeeply("WKB");
    }
  }

  /** Reads a text geometry column: GeoJSON if that is its format, else WKT or EWKT. */
  public DecodedGeometry readText(String text, GeometryFormat format) throws BadGeometryException {
    return format == GeometryFormat.GEOJSON ? readGeoJson(text) : readWkt(text);
  }

  /** Reads WKT, or PostGIS EWKT with an {@code SRID=n;} prefix. */
  public DecodedGeometry readWkt(String wkt) throws BadGeometryException {
    if (wkt == null || wkt.isBlank()) {
      throw new BadGeometryException(Reason.UNPARSEABLE, "no WKT text");
    }
    String text = wkt.strip();
    int srid = 0;
    if (text.regionMatches(true, 0, "SRID=", 0, 5)) {
      int semicolon = text.indexOf(';');
      try {
        srid = Integer.parseInt(text.substring(5, semicolon < 0 ? text.length() : semicolon).strip());
      } catch (NumberFormatException e) {
        throw new BadGeometryException(Reason.UNPARSEABLE, "EWKT has a malformed SRID prefix");
      }
      text = semicolon < 0 ? "" : text.substring(semicolon + 1);
    }
    try {
      Geometry geometry = wktReader.read(text);
      geometry.setSRID(srid);
      return accept(geometry);
    } catch (ParseException | RuntimeException e) {
      throw unparseable("WKT", e);
    } catch (StackOverflowError e) {
      throw nestedTooDeeply("WKT");
    }
  }

  /** Reads a GeoJSON geometry object (RFC 7946 coordinates are WGS 84 longitude, latitude). */
  public DecodedGeometry readGeoJson(String json) throws BadGeometryException {
    if (json == null || json.isBlank()) {
      throw new BadGeometryException(Reason.UNPARSEABLE, "no GeoJSON text");
    }
    try {
      Geometry geometry = geoJsonReader.read(json);
      // GeoJSON has no SRID of its own; a legacy "crs" member may set one, 0 otherwise.
      return accept(geometry);
    } catch (ParseException | RuntimeException e) {
      throw unparseable("GeoJSON", e);
    } catch (StackOverflowError e) {
      throw nestedTooDeeply("GeoJSON");
    }
  }

  private DecodedGeometry accept(Geometry geometry) throws BadGeometryException {
    if (geometry.isEmpty()) {
      throw new BadGeometryException(Reason.EMPTY, "the geometry has no points");
    }
    if (!(geometry instanceof Polygon || geometry instanceof MultiPolygon)) {
      throw new BadGeometryException(
          Reason.NOT_AREAL, "a " + geometry.getGeometryType() + " cannot contain a location");
    }
    if (geometry.getSRID() != 0 && geometry.getSRID() != WGS84) {
      throw new BadGeometryException(
          Reason.UNSUPPORTED_SRID,
          "SRID " + geometry.getSRID() + " is not WGS 84 (" + WGS84 + ") longitude/latitude");
    }
    checkRange(geometry);
    checkVertexCap(geometry);
    TopologyValidationError error = new IsValidOp(geometry).getValidationError();
    if (error == null) {
      return new DecodedGeometry(FenceGeometry.fromJts(withoutEmptyParts(geometry)), Optional.empty());
    }
    String problem = error.getMessage() + " at " + error.getCoordinate();
    if (options.invalidPolicy() == InvalidPolygonPolicy.REJECT) {
      throw new BadGeometryException(Reason.INVALID_POLYGON, problem);
    }
    Geometry fixed = GeometryFixer.fix(geometry);
    if (fixed.isEmpty() || !(fixed instanceof Polygon || fixed instanceof MultiPolygon)) {
      throw new BadGeometryException(
          Reason.UNREPAIRABLE, problem + "; repair left no area (" + fixed.getGeometryType() + ")");
    }
    checkVertexCap(fixed);
    return new DecodedGeometry(FenceGeometry.fromJts(fixed), Optional.of("repaired: " + problem));
  }

  /** A MultiPolygon may hold empty parts; they add nothing and have no shell to store. */
  private Geometry withoutEmptyParts(Geometry geometry) {
    if (!(geometry instanceof MultiPolygon)) {
      return geometry;
    }
    int nonEmpty = 0;
    for (int i = 0; i < geometry.getNumGeometries(); i++) {
      nonEmpty += geometry.getGeometryN(i).isEmpty() ? 0 : 1;
    }
    if (nonEmpty == geometry.getNumGeometries()) {
      return geometry;
    }
    Polygon[] parts = new Polygon[nonEmpty];
    int n = 0;
    for (int i = 0; i < geometry.getNumGeometries(); i++) {
      if (!geometry.getGeometryN(i).isEmpty()) {
        parts[n++] = (Polygon) geometry.getGeometryN(i);
      }
    }
    return factory.createMultiPolygon(parts);
  }

  private static void checkRange(Geometry geometry) throws BadGeometryException {
    var envelope = geometry.getEnvelopeInternal();
    if (envelope.getMinX() < -180 || envelope.getMaxX() > 180) {
      throw new BadGeometryException(
          Reason.OUT_OF_RANGE_COORDINATE,
          "longitude spans [" + envelope.getMinX() + ", " + envelope.getMaxX() + "], outside [-180, 180]");
    }
    if (envelope.getMinY() < -90 || envelope.getMaxY() > 90) {
      throw new BadGeometryException(
          Reason.OUT_OF_RANGE_COORDINATE,
          "latitude spans [" + envelope.getMinY() + ", " + envelope.getMaxY() + "], outside [-90, 90]");
    }
  }

  private void checkVertexCap(Geometry geometry) throws BadGeometryException {
    if (geometry.getNumPoints() > options.maxVertices()) {
      throw new BadGeometryException(
          Reason.TOO_MANY_VERTICES,
          geometry.getNumPoints() + " vertices exceed the cap of " + options.maxVertices());
    }
  }

  private static BadGeometryException unparseable(String format, Exception e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof RingException) {
        return ((RingException) t).problem;
      }
    }
    return new BadGeometryException(
        Reason.UNPARSEABLE, "not " + format + ": " + Objects.toString(e.getMessage(), e.toString()));
  }

  /**
   * Collections nested thousands deep (a bytea column holds anything) overflow the recursive
   * readers' stack, an Error that failed the task on every replay of the edit: refused instead.
   */
  private static BadGeometryException nestedTooDeeply(String format) {
    return new BadGeometryException(Reason.UNPARSEABLE, "not " + format + ": collections nested too deeply to read");
  }

  /**
   * Applies {@link RingCheck} to every ring as the JTS text readers build it, before JTS's own
   * constructor check, so the refusal carries a typed reason.
   */
  private static final class RingCheckingFactory extends GeometryFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public LinearRing createLinearRing(CoordinateSequence points) {
      int size = points == null ? 0 : points.size();
      double[] xy = new double[2 * size];
      for (int i = 0; i < size; i++) {
        xy[2 * i] = points.getX(i);
        xy[2 * i + 1] = points.getY(i);
      }
      try {
        RingCheck.check(xy, size);
      } catch (BadGeometryException e) {
        throw new RingException(e);
      }
      return super.createLinearRing(points);
    }
  }

  /** Carries a typed refusal out through JTS's readers, which only declare ParseException. */
  static final class RingException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final transient BadGeometryException problem;

    RingException(BadGeometryException problem) {
      super(problem.getMessage(), null, false, false);
      this.problem = problem;
    }
  }
}
