//! A session's set-up, carried out: connect and claim the slot, look at the server and the
//! slot, ask [`plan`](super::plan::plan) what to do, then do it (the snapshot marker, the
//! publication, the canary table, the slot, the replication connection, the cleanup ledger).

use super::plan::{self, CanaryStep, Seen, SlotSeen};
use super::*;

impl Replication<'_> {
    /// The publication and the slot (made when missing), the snapshot decision, and a
    /// replication connection (not streaming yet) at the position to resume from.
    pub(super) async fn set_up(&mut self) -> Result<SetUp, RelayError> {
        let cdc = self.cdc;
        let (sql, host) = crate::source::postgres::Database::of(self.settings)
            .connect_host()
            .await?;
        if host != self.host || self.conn.hosts.len() > 1 {
            let (name, port) = &self.conn.hosts[host];
            tracing::info!(host = %name, port, target_session_attrs = self.conn.target.name(), "PostgreSQL server chosen among the URL's hosts");
        }
        self.host = host;
        // Before anything is read for the slot (the initial snapshot above all): one
        // instance per slot (see claim.rs).
        self.claim_slot(&sql).await?;
        if cdc.slot_failover {
            catalog::require_failover_slots(&sql).await?;
        }

        // What the server and the slot are. Capture from a hot standby (PostgreSQL 16+): the
        // slot lives on it, and what needs writes goes to the primary (--primary-url).
        let (_, from_standby) = crate::source::postgres::server_state(&sql).await?;
        let primary = match (&self.settings.primary_url, from_standby) {
            (_, false) => None,
            (None, true) => {
                self.may_capture_from_standby(&sql).await?;
                None
            }
            (Some(_), true) => {
                self.may_capture_from_standby(&sql).await?;
                Some(
                    crate::source::postgres::Database::for_writes(self.settings)
                        .connect()
                        .await?,
                )
            }
        };
        let state = catalog::slot_state(&sql, &cdc.slot).await.map_err(|e| {
            RelayError::postgres("reading the replication slots", e, || {
                "the role needs the REPLICATION attribute".into()
            })
        })?;
        let seen = Seen {
            from_standby,
            primary: primary.is_some(),
            slot: state.as_ref().map(|s| SlotSeen {
                failover: s.failover,
                invalidation: s.invalidation().map(str::to_owned),
            }),
        };
        let plan = plan::plan(cdc, self.settings.cleanup.is_some(), &seen)
            .map_err(RelayError::misconfigured)?;

        let writer = primary.as_ref().unwrap_or(&sql);
        let tables = catalog::outbox_tables(&sql, &self.settings.router).await?;
        // The first table's schema keeps the snapshot marker and the slot's history
        // (`public` for the table-less outbox: logical decoding messages only).
        let home = tables.first().cloned().unwrap_or_else(|| TableName {
            schema: "public".into(),
            name: "pg_logical_emit_message".into(),
        });
        if plan.register_snapshot {
            snapshot::register_new_slot(writer, &home, &cdc.slot).await?;
        }
        catalog::ensure_publication(
            writer,
            &tables,
            &cdc.publication,
            cdc.publication_mode,
            &self.settings.router.columns_read(),
        )
        .await
        .map_err(|e| {
            if !from_standby || primary.is_some() {
                return e;
            }
            // A standby without --primary-url: the publication is made on the primary.
            let on_primary = e
                .problem()
                .map_or_else(|| "`outbox-relay setup-sql` prints it".to_owned(), |p| p.fix);
            RelayError::misconfigured(format!(
                "the publication {} cannot be created or changed on a standby: create it on the primary ({on_primary}), \
                 or pass --primary-url (the primary of this standby)",
                cdc.publication
            ))
        })?;
        // The canary table, in the publication before the stream starts (a row written
        // later is then carried).
        let canary = match plan.canary.clone() {
            CanaryStep::None => false,
            CanaryStep::Off(why) => {
                self.canary_off(why);
                false
            }
            CanaryStep::PublishTable { may_add } => match crate::source::canary::publish_table(
                writer,
                &home.schema,
                &cdc.publication,
                may_add,
            )
            .await
            {
                Ok(()) => true,
                Err(why) => {
                    self.canary_off(why);
                    false
                }
            },
            CanaryStep::Message => true,
        };
        if canary {
            self.canary_off = None;
        }
        // The signal table, in the publication before the stream starts: its rows are the
        // source channel's signals and the incremental snapshots' watermarks.
        if let Some(signal_table) = cdc.signals.table.as_ref() {
            let may_add = matches!(plan.canary, CanaryStep::PublishTable { may_add: true })
                || cdc.publication_mode != crate::config::PublicationMode::Disabled;
            match catalog::add_to_publication(writer, &cdc.publication, signal_table, may_add).await
            {
                Ok(true) => {
                    tracing::info!(publication = %cdc.publication, table = %signal_table, "added the signal table to the publication")
                }
                Ok(false) => {}
                Err(why) => {
                    return Err(RelayError::misconfigured(format!(
                        "the signal table {signal_table}: {why}"
                    )))
                }
            }
        }
        let incremental = if cdc.signals.any() {
            crate::source::incremental::sql::load(writer, &home, &cdc.slot).await?
        } else {
            None
        };
        if plan.wait_for_publication {
            // Made on the primary: the standby has it once it replayed that far.
            catalog::wait_for_publication(&sql, &cdc.publication, Duration::from_secs(60)).await?;
        }

        let mut slot_exists = state.is_some();
        let remade = match &plan.invalidated {
            Some(reason) => self.on_invalidated_slot(&sql, &home, reason).await?,
            None => false,
        };
        if remade {
            slot_exists = false;
        } else if !slot_exists {
            self.on_missing_slot(&sql, &home).await?;
        }
        self.end_own_stale_walsender(&sql).await;
        // Any mode: a marker left owed (a snapshot, or a reread of a lost slot) is honoured.
        let snapshot_state = snapshot::state(writer, &home, &cdc.slot).await?;
        // A new slot that owes a snapshot is created on the replication connection with its
        // snapshot exported, so the rows are read at exactly the slot's consistent point.
        let export = !slot_exists && snapshot_state == snapshot::SnapshotState::Owed;
        // A slot made on a standby waits for the primary to log the running transactions
        // (every 15 s on its own): the relay asks for one every second.
        let _nudge = plan.nudge_primary(slot_exists).then(|| {
            AbortOnDrop(tokio::spawn(log_standby_snapshots(
                crate::source::postgres::Database::for_writes(self.settings),
            )))
        });
        let slot_position = if export {
            None
        } else {
            Some(
                catalog::ensure_slot(&sql, &cdc.slot, &self.conn.database, cdc.slot_failover)
                    .await?,
            )
        };
        let (mut client, identity, start, wal_end) = self.connect_at(slot_position).await?;
        if plan.make_failover && slot_exists {
            // On the replication connection, before it streams; a slot another client
            // streams from is busy (stand by and try again).
            client
                .simple_query(&format!(
                    "ALTER_REPLICATION_SLOT \"{}\" (FAILOVER true)",
                    cdc.slot
                ))
                .await
                .map_err(|e| RelayError::replication(e, &self.conn.display, &cdc.slot))?;
            tracing::info!(slot = %cdc.slot, "the replication slot is now a failover slot (--slot-failover)");
        }
        self.metrics
            .slot_failover
            .set(i64::from(plan.slot_is_failover(slot_exists, cdc)));
        let system_id = identity.system_id.clone();
        let history = identity.history.clone();
        // The two connections of a session reach the same server (a multi-host URL: each
        // picks its host; a failover in between could split them). The catalog's system
        // identifier needs pg_control_system(), which a DBA may have revoked: then the
        // host each was sent to is the check.
        if let Ok(row) = sql
            .query_one(
                "SELECT system_identifier::text FROM pg_control_system()",
                &[],
            )
            .await
        {
            let sql_system: String = row.get(0);
            if sql_system != system_id {
                return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                    "the SQL connection reached PostgreSQL system {sql_system} and the replication connection system \
                     {system_id}: two different servers (a failover in between?); connecting again"
                )));
            }
        }
        let timeline = identity.timeline;
        self.identity = Some(identity);
        // Before CREATE_REPLICATION_SLOT: the snapshot it exports lives only until the
        // session's next command.
        let walsender = walsender(&mut client).await;
        self.walsender = walsender.clone();
        let exported = if export {
            let (snapshot_name, consistent_point) =
                create_slot_exporting_snapshot(&mut client, &cdc.slot, cdc.slot_failover)
                    .await
                    .map_err(|e| RelayError::replication(e, &self.conn.display, &cdc.slot))?;
            tracing::info!(slot = %cdc.slot, %consistent_point, "created replication slot with an exported snapshot");
            // This connection holds the new slot: what commits from now on is relayed.
            self.metrics.active.set(1);
            self.confirmations.forget();
            self.confirmations.resume_from(consistent_point);
            Some((snapshot_name, consistent_point))
        } else {
            None
        };
        let start = exported.as_ref().map_or(start, |(_, point)| *point);
        // The slot exists now: remember it (a failed first start is not a lost slot).
        if !self.remembered {
            slot_history::remember(writer, &home.schema, &cdc.slot, &system_id).await;
            self.remembered = true;
        }
        let cleanup = match &self.settings.cleanup {
            Some(cleanup) if !tables.is_empty() => Some(
                crate::source::cleanup::for_session(
                    &crate::source::postgres::Database::for_writes(self.settings),
                    &tables,
                    &home.schema,
                    &cdc.slot,
                    cleanup.batch,
                )
                .await?,
            ),
            _ => None,
        };
        let (recorder, cleaning) = cleanup.unzip();
        Ok(SetUp {
            sql,
            client,
            walsender,
            system_id,
            timeline,
            history,
            wal_end,
            recorder,
            opening: Opening {
                tables,
                home,
                start,
                // snapshot.mode=always: once at every start, the slot's or not.
                snapshot_owed: snapshot_state == snapshot::SnapshotState::Owed
                    || (cdc.snapshot == crate::config::SnapshotMode::Always
                        && !std::mem::replace(&mut self.snapshot_taken, true)),
                exported,
                cleaning,
                canary,
                incremental,
            },
        })
    }
}
