//! Python analysis: decoding, parsing, per-module summaries, module resolution, dependency slices
//! and token counts.
//!
//! Architecture invariant: this module is pure. It knows nothing about salsa, the cache, the
//! file system or the configuration file; text goes in and plain data comes out.

pub mod decode;
pub mod docstring;
pub mod extract;
pub mod resolve;
pub mod summary;
pub mod tokens;
