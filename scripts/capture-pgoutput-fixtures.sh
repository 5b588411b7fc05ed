#!/usr/bin/env bash
# Regenerates crates/pgoutput/tests/fixtures/pg15-session.hex: the pgoutput messages a real
# PostgreSQL 15 writes for a session that exercises every message and tuple kind.
# One message per line: "<lsn> <hex of the message>".
set -euo pipefail
BIN=${OUTBOX_RELAY_PG_BIN:-/usr/lib/postgresql/15/bin}
OUT=$(cd "$(dirname "$0")/.." && pwd)/crates/pgoutput/tests/fixtures/pg15-session.hex
DIR=$(mktemp -d); chmod 755 "$DIR"
AS=(); [ "$(id -u)" = 0 ] && { chown postgres "$DIR"; AS=(runuser -u postgres --); }
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
"${AS[@]}" "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust >/dev/null
"${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w -o "-p $PORT -c wal_level=logical -c listen_addresses=127.0.0.1 -c unix_socket_directories=$DIR" start >/dev/null
trap '"${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null; rm -rf "$DIR"' EXIT
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d postgres)
"${PSQL[@]}" <<'SQL'
CREATE TABLE outbox (
    id uuid PRIMARY KEY,
    aggregate_type varchar(255) NOT NULL,
    aggregate_id varchar(255) NOT NULL,
    event_type varchar(255) NOT NULL,
    payload jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TYPE mood AS ENUM ('ok', 'happy');
CREATE TABLE other (id int PRIMARY KEY, big text, m mood);
CREATE TABLE full_identity (id int, note text);
ALTER TABLE full_identity REPLICA IDENTITY FULL;
CREATE PUBLICATION pub FOR TABLE outbox, other, full_identity;
SELECT pg_create_logical_replication_slot('fixture', 'pgoutput');
BEGIN;
INSERT INTO outbox VALUES ('8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c01', 'Order', 'order-1', 'OrderCreated', '{"orderId": "order-1", "total": 42.5}', '2026-01-01 00:00:00+00');
INSERT INTO outbox VALUES ('8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c02', 'Order', 'order-1', 'OrderDeleted', NULL, '2026-01-01 00:00:01+00');
COMMIT;
UPDATE outbox SET event_type = 'OrderCreatedV2' WHERE id = '8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c01';
DELETE FROM outbox WHERE id = '8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c02';
-- random text too large to stay inline: stored out of line, so an UPDATE that leaves it alone sends 'u'
INSERT INTO other VALUES (1, (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400)), 'ok');
UPDATE other SET id = 2;
UPDATE other SET m = 'happy';
DELETE FROM other;
INSERT INTO full_identity VALUES (1, 'a');
UPDATE full_identity SET note = 'b';
DELETE FROM full_identity;
TRUNCATE outbox, other;
SELECT pg_logical_emit_message(true, 'outbox-relay', 'transactional');
-- a transaction replayed from another node carries an Origin message
SELECT pg_replication_origin_create('upstream');
SELECT pg_replication_origin_session_setup('upstream');
BEGIN;
SELECT pg_replication_origin_xact_setup('0/AB', now());
INSERT INTO full_identity VALUES (9, 'from upstream');
COMMIT;
SELECT pg_replication_origin_session_reset();
SELECT pg_logical_emit_message(false, 'outbox-relay', 'non-transactional');
ALTER TABLE outbox ADD COLUMN tracingspancontext text;
INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c03', 'Customer', 'c-7', 'CustomerCreated', '{}');
SQL
"${PSQL[@]}" -A -t -F ' ' -c "SELECT lsn, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('fixture', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub', 'messages', 'true')" > "$OUT"
echo "wrote $(wc -l < "$OUT") messages to $OUT"
# The same session with binary 'true': column values in the types' binary send format ('b').
"${PSQL[@]}" -A -t -F ' ' -c "SELECT lsn, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('fixture', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub', 'messages', 'true', 'binary', 'true')" > "${OUT%.hex}-binary.hex"
echo "wrote $(wc -l < "${OUT%.hex}-binary.hex") messages to ${OUT%.hex}-binary.hex"
