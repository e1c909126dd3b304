-- Source of truth for fences, plain PostgreSQL variant: geometry as WKB in bytea (docs/source-contract.md;
-- section 3). Apply this file, then fence-versioning.sql, to the fence database.
CREATE TABLE IF NOT EXISTS fences (
    id          text PRIMARY KEY,
    -- Kept by the trigger in fence-versioning.sql; whatever a client writes here is replaced.
    seq         bigint NOT NULL DEFAULT 1,
    -- WKB or EWKB of a Polygon or MultiPolygon, longitude/latitude (SRID 4326 or none).
    geom        bytea NOT NULL,
    tenant      text,
    name        text,
    properties  jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
