package dev.geofence.connectors.cdc;

import dev.geofence.state.geom.BadGeometryException;
import dev.geofence.state.geom.DecodedGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;

/**
 * Decodes a fence change's geometry as the source delivers it (WKB bytes, WKT or GeoJSON text):
 * the costliest step of loading a fence (parsing, ring checks, validity, the coverage grid), so a
 * read from the source decodes on its own thread while the task thread applies. One per thread:
 * JTS's readers keep parse state.
 */
public final class FenceDecoder {

  /** A change's geometry decoded, or why it could not be. */
  public record Decoded(DecodedGeometry geometry, BadGeometryException failure) {}

  private final FenceGeometryReader reader;
  private final GeometryFormat format;

  public FenceDecoder(GeometryReadOptions options, GeometryFormat format) {
    this.reader = new FenceGeometryReader(options);
    this.format = format;
  }

  /** The geometry of an upsert (null for a delete, which has none). */
  public Decoded decode(FenceChange change) {
    if (change.kind != FenceChange.Kind.FENCE || change.delete) {
      return null;
    }
    try {
      return new Decoded(read(change), null);
    } catch (BadGeometryException e) {
      return new Decoded(null, e);
    }
  }

  private DecodedGeometry read(FenceChange change) throws BadGeometryException {
    if (change.geometryBytes != null) {
      return reader.readWkb(change.geometryBytes);
    }
    if (change.geometryText == null) {
      throw new BadGeometryException(BadGeometryException.Reason.EMPTY, "the geometry column is null");
    }
    return reader.readText(change.geometryText, format);
  }
}
