//! `r2e sandboxed` (hidden): one program in the local sandbox, as r2e runs untrusted code; the
//! benches' own untrusted runs use it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use r2e_core::error::{Error, Result};
use r2e_exec::sandbox::{Exit, Job, Limits, Sandbox};

use super::Global;

/// Run one program in the sandbox, as r2e runs untrusted code (for the benches)
///
/// Run PROGRAM in the sandbox (bubblewrap, no network, r2e's fixed environment and the
/// `--env` variables only, nothing of this machine but its system software, the `--read`
/// folders and the working folder, which is the only one it may write). Its output is
/// printed as it was captured (stdout, then stderr); the exit code is its own, 124 when the
/// wall-clock limit stopped it, 128 + N when signal N killed it.
#[derive(clap::Args)]
pub struct Args {
    /// Folders (or files) it may read, at their own paths.
    #[arg(long = "read", value_name = "PATH")]
    read: Vec<PathBuf>,
    /// The working folder: the only one it may write, and its `$HOME`.
    #[arg(long, value_name = "DIR")]
    workdir: PathBuf,
    /// A variable it sees, `NAME=VALUE` (none of this process's are passed).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Wall-clock limit in seconds (also its CPU-time limit).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Runs the program; prints its captured output, returns its exit code (124 for the wall-clock
/// limit, 128 + N for signal N).
pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let env = args
        .env
        .iter()
        .map(|v| match v.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(Error::input(format!("`--env {v}` is not `NAME=VALUE`"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let workdir = std::fs::canonicalize(&args.workdir)
        .map_err(|e| Error::input(format!("`{}`: {e}", args.workdir.display())))?;
    let (program, rest) = args.command.split_first().expect("clap requires a command");
    let job = Job {
        program: PathBuf::from(program),
        args: rest.to_vec(),
        env,
        scratch: workdir,
        writable: vec![],
        readonly: args.read,
        hidden: vec![],
        network: false,
        limits: Limits {
            cpu_seconds: args.timeout,
            memory_mib: 4096,
            processes: 256,
            file_size_mib: 512,
            wall_seconds: args.timeout,
        },
        image: None,
    };
    let sandbox = r2e_exec::sandbox::local::LocalSandbox::new(global.unsafe_no_sandbox);
    let out = sandbox.run(&job)?;
    std::io::stdout().write_all(&out.stdout)?;
    std::io::stderr().write_all(&out.stderr)?;
    let code = match out.exit {
        Exit::Code(c) => c,
        Exit::Signal(s) => 128 + s,
        Exit::Timeout => 124,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
