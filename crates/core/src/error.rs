//! The three kinds of failure and the exit codes they map to, as buck2 classifies errors.
//!
//! - **Input**: the user's fault (a bad config, a missing path, an unknown id): exit 2.
//! - **Env**: the machine's (I/O, git, a daemon, a full disk): exit 1, with a clear message.
//!   Never cached: the next build tries again.
//! - **Internal**: a bug: exit 1.
//!
//! A function or file that fails to analyse is not an error here: it is data, recorded in the
//! build's outputs. Modules that have failures of their own define them with `thiserror` and
//! convert them into this type at their edge.

/// An error that stops a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the user. Exit status 2.
    #[error("{0}")]
    Input(String),
    /// The environment failed: I/O, a subprocess, a lock. Exit status 1.
    #[error("{0}")]
    Env(String),
    /// A bug in r2e. Exit status 1.
    #[error("internal error (a bug in r2e): {0}")]
    Internal(String),
    /// `r2e check` could not run the candidate (no environment, the sandbox failed). Exit 3.
    #[error("{0}")]
    Unrunnable(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }
    pub fn env(msg: impl Into<String>) -> Self {
        Error::Env(msg.into())
    }
    pub fn internal(msg: impl std::fmt::Display) -> Self {
        Error::Internal(msg.to_string())
    }
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Env(_) | Error::Internal(_) => 1,
            Error::Unrunnable(_) => 3,
        }
    }
}

impl From<std::io::Error> for Error {
    /// `fs_err` errors already name their path; a full disk says so first.
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::StorageFull {
            return Error::Env(format!("the disk is full: {e}"));
        }
        match e.raw_os_error().or_else(|| {
            e.get_ref()
                .and_then(|inner| inner.downcast_ref::<std::io::Error>())
                .and_then(std::io::Error::raw_os_error)
        }) {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::Env(format!("the disk is full: {e}")),
            _ => Error::Env(e.to_string()),
        }
    }
}
