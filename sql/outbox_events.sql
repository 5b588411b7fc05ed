-- The second outbox shape from the seeds (shared/seeds/002): the writer names the topic.
-- Relay it with:
--   outbox-relay run --table public.outbox_events --route-by-column topic \
--       --topic-template '${routedByValue}' --key-column aggregate_id ...
CREATE TABLE IF NOT EXISTS public.outbox_events (
    id             uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    topic          varchar(249) NOT NULL,
    aggregate_type varchar(255) NOT NULL,
    aggregate_id   varchar(255) NOT NULL,
    event_type     varchar(255) NOT NULL,
    payload        jsonb,
    created_at     timestamptz  NOT NULL DEFAULT now()
);
