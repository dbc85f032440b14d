//! The command line: a module per command (or small family of commands), each with its clap
//! arguments and one entry point, `run`. A command's product goes to stdout; progress and
//! messages go to stderr. Errors are printed once and mapped to an exit code (2 for bad input,
//! 1 for the environment or a bug).

mod args;
mod build;
mod check;
mod cluster;
mod completions;
mod curate;
mod dataset;
mod export;
mod gc;
mod image;
mod init;
mod inspect;
mod report;
mod sandboxed;
mod serve;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use r2e_core::config::Config;
use r2e_core::error::{Error, Result};

#[derive(Parser)]
#[command(
    name = "r2e",
    version,
    about = "Turn Python repositories into executable coding-benchmark environments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    global: Global,
}

// The options every command takes (no doc comment: a flattened struct's would become the
// command's `about`).
#[derive(clap::Args)]
pub struct Global {
    /// Run untrusted code without bubblewrap: NO isolation from this machine
    ///
    /// Run repositories' and models' code even without bubblewrap, with NO isolation from this
    /// machine (only resource limits). Never on a machine with anything to protect.
    #[arg(long, global = true)]
    unsafe_no_sandbox: bool,
}

impl Global {
    /// The services a command runs a configuration's untrusted code with.
    fn services(&self, cfg: &Config) -> r2e_exec::services::Services {
        r2e_exec::services::Services::for_config(cfg, self.unsafe_no_sandbox)
    }
}

// Each command's help is its arguments' doc comment, in its module.
#[derive(Subcommand)]
enum Command {
    Init(init::Args),
    Build(build::Args),
    Curate(curate::Args),
    Status(inspect::StatusArgs),
    Check(check::Args),
    Report(report::Args),
    Gc(gc::Args),
    Export(export::ExportArgs),
    Import(export::ImportArgs),
    Image(image::Args),
    Dataset(dataset::Args),
    Serve(serve::Args),
    Cluster(cluster::Args),
    Completions(completions::Args),
    Explain(inspect::ExplainArgs),
    #[command(hide = true)]
    Sandboxed(sandboxed::Args),
}

/// Runs the command line and returns the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let global = &cli.global;
    match cli.command {
        Command::Init(args) => init::run(args),
        Command::Build(args) => build::run(args, global),
        Command::Curate(args) => curate::run(args),
        Command::Status(args) => inspect::status(args),
        Command::Check(args) => check::run(args, global),
        Command::Report(args) => report::run(args),
        Command::Gc(args) => gc::run(args),
        Command::Export(args) => export::export(args),
        Command::Import(args) => export::import(args),
        Command::Image(args) => image::run(args, global),
        Command::Dataset(args) => dataset::run(args),
        Command::Serve(args) => serve::run(args, global),
        Command::Cluster(args) => cluster::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Explain(args) => inspect::explain(args),
        Command::Sandboxed(args) => sandboxed::run(args, global),
    }
}

/// The exit code of a command that did its work but failed in part (the environment's code).
fn failed() -> ExitCode {
    ExitCode::from(Error::env("").exit_code())
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    print_text(&format!(
        "{}\n",
        serde_json::to_string_pretty(v).map_err(Error::internal)?
    ))
}

/// Prints a command's product; a closed pipe is not an error.
fn print_text(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::env(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}
