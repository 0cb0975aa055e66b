use std::process::ExitCode;

fn main() -> ExitCode {
    attempt_ledger::cli::main()
}
