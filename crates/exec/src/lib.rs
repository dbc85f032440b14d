//! r2e's execution layer: everything that runs code or asks a model, one job at a time. The
//! sandbox backends (bubblewrap, Docker, a fake), the images they run, the Python embedded to run
//! inside them and its typed protocol, the model clients, the services handed down to the build,
//! and the run machinery: jobs, warm workers, the splicing of a candidate into its module, and
//! the one check path that `check`, `evaluate`, `serve` and validation all go through.
//!
//! Architecture invariant: this crate knows nothing of salsa or of the build's stages; it runs
//! what it is given (a [`target::Target`], a runtime, a request) and says what happened.

pub mod checkpath;
pub mod http;
pub mod image;
pub mod image_share;
pub mod interpreter;
pub mod jobs;
pub mod llm;
pub mod py;
pub mod pypi;
pub mod runs;
pub mod sandbox;
pub mod services;
pub mod splice;
pub mod target;
pub mod verifier;
pub mod warm;
