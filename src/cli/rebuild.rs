//! `attempt-ledger rebuild`: derive everything again from the stored
//! attempts. Records keep the provider spelling they arrived with, so an
//! edited alias table (a new alias, an alias moved to another provider)
//! reaches old data without re-ingesting anything; the per-workflow facts,
//! rollups and totals are then recomputed from scratch (after an upgrade,
//! or to prove the incrementally kept ones right: they must not change).

use std::process::ExitCode;

use super::{DbArg, ProvidersArg};
use crate::store::{Job, MemoryLimit, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    providers: ProvidersArg,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let limit = MemoryLimit::for_job(Job::Bulk);
    eprintln!("{limit}");
    let store = Store::open_for_job(&args.db.db, &limit)?.with_aliases(args.providers.load()?);
    let kept = store.derived_checksum()?;
    let rows = store.reapply_aliases()?;
    println!("re-applied provider aliases: {rows} stored attempts changed provider names");
    if rows > 0 {
        // Names moved, so reapply_aliases derived everything again already.
        println!("derived facts, rollups and totals again from every stored attempt");
        return Ok(ExitCode::SUCCESS);
    }
    // Derived again from scratch: comparing the result with what was kept
    // is what proves the kept tables right.
    let workflows = store.rebuild_derived()?;
    let changed = kept != store.derived_checksum()?;
    println!(
        "derived facts, rollups and totals for {workflows} workflows{}",
        if changed { " (the stored ones differed and were replaced)" } else { " (unchanged)" }
    );
    let quarantined = store.quarantined_count()?;
    if quarantined > 0 {
        println!(
            "{quarantined} workflows still fail to derive and stay quarantined (attempt-ledger quarantine)"
        );
    }
    Ok(ExitCode::SUCCESS)
}
