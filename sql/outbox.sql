-- The outbox table from the seeds (shared/seeds/000, 001): a service inserts its business
-- row and one row here in the SAME transaction; outbox-relay streams the INSERTs to Kafka.
--   topic = <aggregate_type>.events, key = aggregate_id, value = payload,
--   headers: id = id, eventType = event_type. A NULL payload is relayed as a tombstone
--   (payload is nullable here for that reason; the seeds declare it NOT NULL).
CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid         PRIMARY KEY,
    aggregate_type varchar(255) NOT NULL,
    aggregate_id   varchar(255) NOT NULL,
    event_type     varchar(255) NOT NULL,
    payload        jsonb,
    created_at     timestamptz  NOT NULL DEFAULT now(),
    -- Insertion order, for polling relays (`--mode polling` orders by it): timestamps tie
    -- within a transaction and can invert across concurrent ones, ctid follows free space.
    seq            bigint       GENERATED ALWAYS AS IDENTITY
);

-- Only needed by polling relays (and cleanup jobs); logical replication does not read the table.
CREATE INDEX IF NOT EXISTS idx_outbox_seq ON public.outbox (seq);
CREATE INDEX IF NOT EXISTS idx_outbox_created_at ON public.outbox (created_at);

-- Relayed rows can be deleted at any time (DELETEs are not events), e.g. by a cleanup job:
--   DELETE FROM public.outbox WHERE created_at < now() - interval '1 day';
-- or in the writing transaction itself, right after the INSERT (Debezium's pattern).
