//! Where the whole event of a dead letter that cannot give it back is kept. A refused event's
//! letter keeps its key, its id and at most its payload (none when the payload was what Kafka
//! refused); the event's whole row is:
//! - in polling mode's dead-letter table, named by the letter's `outbox-relay.row.kept`
//!   (`schema.outbox_relay_dead_letters/<id>`): polling retires the outbox row, after copying
//!   it there in the same transaction;
//! - otherwise in the outbox table itself (`outbox-relay.source.table`), found by the event's
//!   id: the stream never deletes a row, and `--cleanup` leaves a dead-lettered event's row.
//!
//! The row found becomes the letter's row, which `replay` routes again with the current
//! configuration, as it does for a row the letter carries.

use super::letter::{parse_row, Format, Letter, Row};
use crate::config::Settings;
use crate::error::RelayError;
use crate::source::sql_rows;
use outbox_router::TableName;
use postgres_protocol::escape::escape_identifier;

/// Whether `letter` needs its row found: the relay's letter of an event whose row it does not
/// carry, and whose payload it left out or whose row polling kept.
fn needs_row(letter: &Letter) -> bool {
    letter.row.is_none()
        && (letter.row_kept.is_some()
            || (letter.format == Format::Relay && letter.original_size.is_some()))
}

/// Finds the whole row of each letter that needs one (see the module's note), reading
/// PostgreSQL only when some letter does.
pub async fn find_rows(settings: &Settings, letters: &mut [Letter]) -> Result<(), RelayError> {
    if !letters.iter().any(needs_row) {
        return Ok(());
    }
    let client = match crate::source::postgres::Database::of(settings)
        .connect()
        .await
    {
        Ok(client) => client,
        Err(e) => {
            // Said for each letter that needed it; the others are listed and replayed.
            for letter in letters.iter_mut().filter(|l| needs_row(l)) {
                letter.found = Some(Err(format!(
                    "PostgreSQL cannot be reached to find its row: {e}"
                )));
            }
            return Ok(());
        }
    };
    let id_column = &settings.router.id_column;
    for letter in letters.iter_mut().filter(|l| needs_row(l)) {
        let found = match letter.row_kept.clone() {
            Some(kept) => kept_row(&client, &kept).await,
            None => outbox_row(&client, letter, id_column).await,
        };
        match found {
            Ok((row, place, table)) => {
                letter.row = Some(Ok(row));
                letter.found = Some(Ok(place));
                letter.table.get_or_insert(table);
            }
            Err(why) => letter.found = Some(Err(why)),
        }
    }
    Ok(())
}

/// The row `kept` (`schema.table/<id>`) names in a dead-letter table, where it is, and the
/// table it came from.
async fn kept_row(
    client: &tokio_postgres::Client,
    kept: &str,
) -> Result<(Row, String, String), String> {
    let Some((table, id)) = kept.rsplit_once('/') else {
        return Err(format!(
            "its row is said to be kept at {kept:?}, which names no row"
        ));
    };
    let name = TableName::parse(table).map_err(|e| format!("{table}: {e}"))?;
    let query = format!(
        "SELECT source_row::text, source_table FROM {} WHERE id = $1::text::uuid",
        sql_rows::qualified(&name)
    );
    let row = client
        .query_opt(&query, &[&id])
        .await
        .map_err(|e| {
            format!(
                "its row is kept in {table}, which cannot be read: {}",
                crate::error::server_message(&e)
            )
        })?
        .ok_or_else(|| format!("its row {id} is no longer in {table}"))?;
    let (json, source): (String, String) = (row.get(0), row.get(1));
    let row = parse_row(&json).map_err(|e| format!("its row {id} in {table}: {e}"))?;
    Ok((row, kept.to_owned(), source))
}

/// The outbox row with the letter's event id, in the table it came from.
async fn outbox_row(
    client: &tokio_postgres::Client,
    letter: &Letter,
    id_column: &str,
) -> Result<(Row, String, String), String> {
    let table = letter
        .table
        .as_deref()
        .and_then(|t| TableName::parse(t).ok())
        .ok_or("it names no source table")?;
    let id = letter.event_id().ok_or("it carries no event id")?;
    let relation = sql_rows::relation(client, &table, 1)
        .await
        .map_err(|e| format!("{table} cannot be read: {e}"))?;
    if relation.column_index(id_column).is_none() {
        return Err(format!("{table} has no event id column {id_column:?}"));
    }
    let query = format!(
        "SELECT {} FROM {} WHERE {}::text = ANY($1)",
        sql_rows::select_list(&relation),
        sql_rows::qualified(&table),
        escape_identifier(id_column)
    );
    // The id as the header has it, and without the quotes a JSON header converter adds.
    let mut ids = vec![id.clone()];
    if let Some(unquoted) = id.strip_prefix('"').and_then(|i| i.strip_suffix('"')) {
        ids.push(unquoted.to_owned());
    }
    let rows = client.query(&query, &[&ids]).await.map_err(|e| {
        format!(
            "{table} cannot be read: {}",
            crate::error::server_message(&e)
        )
    })?;
    match rows.as_slice() {
        [row] => Ok((
            relation
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.clone(), row.get::<_, Option<String>>(i)))
                .collect(),
            table.to_string(),
            table.to_string(),
        )),
        [] => Err(format!(
            "no row of {table} has {id_column} {id} any more (deleted since)"
        )),
        more => Err(format!(
            "{} rows of {table} have {id_column} {id}",
            more.len()
        )),
    }
}
