-- Source of truth for fences, plain PostgreSQL variant: geometry as WKB in bytea (docs/source-contract.md;
-- section 3). Apply this file, then fence-versioning.sql, to the fence database.
CREATE TABLE IF NOT EXISTS fences (
    id          text PRIMARY KEY,
    -- Kept by the trigger in fence-versioning.sql; whatever a client writes here is replaced.
    seq         bigint NOT NULL DEFAULT 1,
    -- WKB or EWKB of a Polygon or MultiPolygon, longitude/latitude (SRID 4326 or none).
    geom        bytea NOT NULL,
    tenant      text,
    -- The fence's own dwell delay: an object inside it this long DWELLs (0: never). Where null,
    -- and in a table without the column (--dwell-delay-column names it), the job's --dwell-delay holds.
    dwell_delay interval,
    name        text,
    properties  jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A table an earlier release made gets the column too; only then, since adding it locks the table.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'fences'::regclass AND attname = 'dwell_delay'
                   AND NOT attisdropped) THEN
        ALTER TABLE fences ADD COLUMN dwell_delay interval;
    END IF;
END $$;
