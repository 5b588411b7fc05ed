-- An outbox partitioned by day, so that retention is DROP TABLE of an old partition (no
-- DELETE, no VACUUM). outbox-relay publishes it with publish_via_partition_root = true, so
-- rows of every partition arrive as rows of public.outbox.
CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid         NOT NULL,
    aggregate_type varchar(255) NOT NULL,
    aggregate_id   varchar(255) NOT NULL,
    event_type     varchar(255) NOT NULL,
    payload        jsonb,
    created_at     timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

-- Create partitions ahead of time (e.g. daily from cron or pg_partman):
--   CREATE TABLE public.outbox_2026_11_22 PARTITION OF public.outbox
--       FOR VALUES FROM ('2026-11-22') TO ('2026-11-23');
-- A default partition catches rows no partition covers yet:
CREATE TABLE IF NOT EXISTS public.outbox_default PARTITION OF public.outbox DEFAULT;

-- Retention: once a day's events are relayed (the slot's confirmed_flush_lsn is past them),
--   DROP TABLE public.outbox_2026_11_20;
