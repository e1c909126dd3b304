-- Source of truth for fences, PostGIS variant (docs/source-contract.md; docs/design.md#source-of-truth-contract).
-- Apply this file, then fence-versioning.sql, to the fence database.
CREATE EXTENSION IF NOT EXISTS postgis;

CREATE TABLE IF NOT EXISTS fences (
    id          text PRIMARY KEY,
    -- Kept by the trigger in fence-versioning.sql; whatever a client writes here is replaced.
    seq         bigint NOT NULL DEFAULT 1,
    -- Polygon or MultiPolygon, longitude/latitude. No validity constraint on purpose: the job
    -- repairs or dead-letters bad shapes with a reason, so none goes missing silently.
    geom        geometry(Geometry, 4326) NOT NULL,
    tenant      text,
    name        text,
    properties  jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
