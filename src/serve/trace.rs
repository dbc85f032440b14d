//! A session's trace: every action an agent took and what it observed, one JSON line each, in
//! `<output>/traces/SESSION.jsonl`. The first line names the instance, its harness and its
//! environment's lock; the last says why the session closed. Lines are appended whole; a
//! submission's line reaches the disk (`fsync`) before the server answers it, so a killed
//! server loses no reward it reported.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use r2e_core::records::{CloseReason, TraceLine};

use r2e_core::error::Result;

/// The seconds since the epoch, with milliseconds.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| (d.as_millis() as f64) / 1000.0)
}

/// An open session's trace file.
pub struct Trace {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl Trace {
    /// Creates the trace of a new session with its first line.
    pub fn create(dir: &Path, session: &str, open: TraceLine) -> Result<Trace> {
        fs_err::create_dir_all(dir)?;
        let path = dir.join(format!("{session}.jsonl"));
        let file = fs_err::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)?
            .into_parts()
            .0;
        let trace = Trace {
            path,
            file: Mutex::new(file),
        };
        trace.append(&open, true)?;
        Ok(trace)
    }

    /// Appends one line; `durable`: it reaches the disk before this returns.
    pub fn append(&self, line: &TraceLine, durable: bool) -> Result<()> {
        let mut text = serde_json::to_vec(line).map_err(r2e_core::error::Error::internal)?;
        text.push(b'\n');
        let mut file = self.file.lock().expect("trace lock");
        file.write_all(&text)
            .map_err(|e| r2e_core::error::Error::env(format!("{}: {e}", self.path.display())))?;
        if durable {
            file.sync_data().map_err(|e| {
                r2e_core::error::Error::env(format!("{}: {e}", self.path.display()))
            })?;
        }
        Ok(())
    }

    /// Appends the closing line, durably.
    pub fn close(&self, reason: CloseReason) -> Result<()> {
        self.append(&close_line(reason), true)
    }
}

fn close_line(reason: CloseReason) -> TraceLine {
    TraceLine::Close {
        reason,
        time: now(),
    }
}

/// Closes the trace of a session that a dead server left open: appends a close line (reason
/// `restart`) unless its last line already closes it. A last line cut short by the kill is
/// ended first, so that every line before stays readable.
pub fn close_orphan(dir: &Path, session: &str) -> Result<bool> {
    let path = dir.join(format!("{session}.jsonl"));
    let Ok(text) = std::fs::read(&path) else {
        return Ok(false);
    };
    let last = text
        .split(|&b| b == b'\n')
        .rfind(|l| !l.is_empty())
        .and_then(|l| serde_json::from_slice::<TraceLine>(l).ok());
    if matches!(last, Some(TraceLine::Close { .. })) {
        return Ok(false);
    }
    let mut file = fs_err::OpenOptions::new().append(true).open(&path)?;
    let mut line = Vec::new();
    if !text.is_empty() && !text.ends_with(b"\n") {
        line.push(b'\n');
    }
    line.extend(
        serde_json::to_vec(&close_line(CloseReason::Restart))
            .map_err(r2e_core::error::Error::internal)?,
    );
    line.push(b'\n');
    file.write_all(&line)?;
    file.sync_data()?;
    Ok(true)
}
