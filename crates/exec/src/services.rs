//! The services a build uses, built once from the configuration and handed down to the stages
//! and front doors: the sandbox that runs untrusted code, and the client that asks models.
//! Tests build them from fakes ([`crate::sandbox::fake::FakeSandbox`],
//! [`crate::llm::fake::ScriptedModel`]).

use std::sync::Arc;

use crate::llm::ModelClient;
use crate::llm::http::HttpClient;
use crate::sandbox::Sandbox;
use crate::sandbox::docker::DockerSandbox;
use crate::sandbox::local::LocalSandbox;
use r2e_core::config::{Backend, Config};

/// Where code runs and where answers come from.
#[derive(Clone)]
pub struct Services {
    pub sandbox: Arc<dyn Sandbox>,
    pub models: Arc<dyn ModelClient>,
}

impl Services {
    /// The services a configuration names: its sandbox backend, and HTTP for model providers
    /// (the client starts on its first request). `allow_unsandboxed` (`--unsafe-no-sandbox`)
    /// lets the local backend run code without bubblewrap.
    pub fn for_config(cfg: &Config, allow_unsandboxed: bool) -> Services {
        let sandbox: Arc<dyn Sandbox> = match cfg.sandbox.backend {
            Backend::Local => Arc::new(LocalSandbox::new(allow_unsandboxed)),
            Backend::Docker => {
                let cfg = cfg.clone();
                Arc::new(DockerSandbox::lazy(Box::new(move |remote| {
                    // coverage.py for the image installs in the local sandbox, into the
                    // cache whose lock the build holds.
                    let local = LocalSandbox::new(allow_unsandboxed);
                    let tools = cfg.cache.join(r2e_core::cache::Bucket::Tools.folder());
                    // With a remote store, the image another host built is loaded instead.
                    let share = remote.map(|remote| crate::image_share::Share {
                        remote,
                        registry: cfg.sandbox.registry.clone(),
                        scratch: cfg.cache.join(r2e_core::cache::Bucket::Scratch.folder()),
                    });
                    let ((tag, built), _) =
                        crate::image::base_in(&cfg, &tools, &local, share.as_ref())?;
                    if built {
                        eprintln!("built the base image {tag}");
                    }
                    Ok((crate::sandbox::docker::connect()?, tag))
                })))
            }
        };
        Services {
            sandbox,
            models: Arc::new(HttpClient::new()),
        }
    }
}
