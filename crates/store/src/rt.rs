//! The tokio runtime a remote store owns, so that the synchronous [`Store`] methods can block
//! on asynchronous clients from any thread.
//!
//! [`Store`]: r2e_core::cache::Store

use std::future::Future;
use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use r2e_core::error::{Error, Result};

/// A small multi-threaded runtime: its two workers drive the connections, and a caller's thread
/// polls its own request (so that many threads, rayon's workers, wait at once).
pub(crate) struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    pub(crate) fn new() -> Result<Arc<Runtime>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("r2e-store")
            .enable_all()
            .build()
            .map_err(|e| Error::env(format!("cannot start a remote store's runtime: {e}")))?;
        Ok(Arc::new(Runtime(Some(runtime))))
    }

    fn inner(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("the runtime lives until dropped")
    }

    /// Runs `future` to its end. From a thread inside another tokio runtime (where blocking on
    /// this one would panic), on a thread of its own.
    pub(crate) fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.inner().block_on(future);
        }
        std::thread::scope(
            |scope| match scope.spawn(|| self.inner().block_on(future)).join() {
                Ok(out) => out,
                Err(panic) => std::panic::resume_unwind(panic),
            },
        )
    }

    /// Starts `future` on the runtime's workers.
    pub(crate) fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner().spawn(future)
    }
}

impl Drop for Runtime {
    /// Without waiting for its tasks: a store may be dropped inside another runtime, where a
    /// runtime's usual drop (which blocks) would panic.
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A stream of bytes read as a [`Read`]: each read that needs more blocks on the next chunk,
/// so that a large blob is never held whole in memory.
pub(crate) struct StreamReader {
    runtime: Arc<Runtime>,
    stream: BoxStream<'static, std::result::Result<Bytes, String>>,
    chunk: Bytes,
    done: bool,
}

impl StreamReader {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        stream: BoxStream<'static, std::result::Result<Bytes, String>>,
    ) -> StreamReader {
        StreamReader {
            runtime,
            stream,
            chunk: Bytes::new(),
            done: false,
        }
    }
}

impl Read for StreamReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.chunk.is_empty() {
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            match self.runtime.block_on(self.stream.next()) {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(std::io::Error::other(e));
                }
                None => self.done = true,
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_blocks_from_a_plain_thread_and_from_inside_another_runtime() {
        let rt = Runtime::new().unwrap();
        assert_eq!(rt.block_on(async { 1 + 1 }), 2);
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let rt2 = rt.clone();
        assert_eq!(other.block_on(async move { rt2.block_on(async { 3 }) }), 3);
        // Dropped inside another runtime: no panic.
        other.block_on(async move { drop(rt) });
    }

    #[test]
    fn a_stream_reads_as_bytes() {
        let rt = Runtime::new().unwrap();
        let chunks: Vec<std::result::Result<Bytes, String>> = vec![
            Ok(Bytes::from_static(b"abc")),
            Ok(Bytes::new()),
            Ok(Bytes::from_static(b"defgh")),
        ];
        let mut reader = StreamReader::new(rt.clone(), futures_util::stream::iter(chunks).boxed());
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"abcdefgh");
        let failing: Vec<std::result::Result<Bytes, String>> =
            vec![Ok(Bytes::from_static(b"a")), Err("cut".into())];
        let mut reader = StreamReader::new(rt, futures_util::stream::iter(failing).boxed());
        let err = reader.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "cut");
    }
}
