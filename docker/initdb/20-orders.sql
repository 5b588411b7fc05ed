-- The demo's business table: order-service writes a row here and its event into outbox
-- in the same transaction.
CREATE TABLE IF NOT EXISTS public.orders (
    id       uuid PRIMARY KEY,
    customer text NOT NULL,
    total    numeric NOT NULL
);
