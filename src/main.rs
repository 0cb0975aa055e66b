use std::process::ExitCode;

fn main() -> ExitCode {
    cap_malloc_arenas();
    attempt_ledger::cli::main()
}

/// glibc's malloc gives each thread that allocates at once an arena of its
/// own, up to eight per core, and keeps what is freed in each: with decoding
/// on the blocking pool, the writer, the deriver and DuckDB's threads all
/// allocating large transient buffers, the resident memory after a burst of
/// large requests varied from 550 to 670 MiB between identical runs of
/// `scripts/memory-ceiling.sh`, and stayed at 470-490 MiB with two arenas,
/// as fast. `MALLOC_ARENA_MAX`, when set, is left to decide.
#[allow(unsafe_code)]
fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a malloc parameter; it is called before
        // any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
