-- Cleanup strategies for public.outbox. DELETE and TRUNCATE are never events.
--
-- 0. Let the relay do it: `outbox-relay run --cleanup` deletes exactly the rows whose events
--    Kafka acknowledged and whose position is confirmed (docs/operating.md, "Cleaning the outbox"). The
--    strategies below are for teams that do not turn it on; 2. is a guess by age.

-- 1. Keep the table empty: delete the row in the same transaction that inserts it. The
--    INSERT is still in the WAL, so it is relayed (Debezium's recommended pattern).
--    BEGIN;
--      INSERT INTO orders ...;
--      INSERT INTO outbox (id, ...) VALUES ('...', ...);
--      DELETE FROM outbox WHERE id = '...';
--    COMMIT;

-- 2. A periodic job deleting rows older than the relay could still need:
--    DELETE FROM public.outbox WHERE created_at < now() - interval '1 day';

-- 3. A partitioned outbox dropping whole partitions: see outbox_partitioned.sql.
