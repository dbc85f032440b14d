//! `r2e serve`.

use std::process::ExitCode;

use r2e_core::error::Result;

use super::Global;
use super::args::{PipelineFile, help_of, one_dataset};

/// Serve the built dataset to programming agents over HTTP/JSON
///
/// Serve the built dataset to programming agents over HTTP/JSON: sessions on instances with
/// a workspace (the repository, the function stubbed), files, commands in the sandbox, test
/// feedback and a reward on submission; every action traced to `<output>/traces/`. Stops on
/// SIGINT or SIGTERM. The API is at `/openapi.json` (and in the README).
#[derive(clap::Args)]
#[command(mut_args(help_of("pipeline", "The pipeline whose built dataset is served")))]
pub struct Args {
    #[command(flatten)]
    pipeline: PipelineFile,
    /// The variant whose dataset is served (pipelines with `[[variant]]` tables).
    #[arg(long)]
    variant: Option<String>,
    /// The address to listen on (port 0: any free port; the one taken is printed). An
    /// address other than loopback needs `--token-env`.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// The environment variable holding the bearer token every request must carry.
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// Sessions open at once; beyond, opening one answers 429 with `Retry-After`.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// Seconds without a request after which a session is closed.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    idle_timeout: u64,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let cfg = args.pipeline.load()?;
    let cfg = one_dataset(&cfg, args.variant.as_deref())?;
    let opts = crate::serve::Options {
        addr: args.addr,
        token_env: args.token_env,
        max_sessions: args.max_sessions,
        idle_timeout: std::time::Duration::from_secs(args.idle_timeout),
    };
    crate::serve::serve(cfg, &global.services(cfg), opts)?;
    Ok(ExitCode::SUCCESS)
}
