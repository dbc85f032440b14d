//! `r2e cluster`: a pipeline built in shards on a cluster, each host with its own local cache
//! and the results in the remote cache, then assembled from the shards' stored results.
//!
//! Each engine is one file implementing [`r2e_pipeline::cluster::Engine`], driven by
//! [`r2e_pipeline::cluster::drive`], and one line of [`engines`]. [`slurm`] is `r2e cluster
//! slurm`: batch scripts, a job array of the shards and a job depending on it that assembles the
//! dataset, optionally submitted with `sbatch`. [`ray`] is `r2e cluster ray`: the same jobs
//! submitted to a Ray cluster over its Job Submission REST API and followed to their end.
//! [`k8s`] is `r2e cluster k8s`: the same as Kubernetes manifests (an Indexed Job of the
//! shards, a suspended assemble Job), printed or applied with `kubectl` and followed.

pub mod k8s;
pub mod ray;
pub mod slurm;

use r2e_core::config::Shard;
use r2e_core::error::Result;
use r2e_pipeline::cluster::Engine;

/// Every cluster engine, in the order `r2e build` asks them which shard it is.
pub fn engines() -> Vec<Box<dyn Engine>> {
    vec![
        Box::<k8s::K8s>::default(),
        Box::<slurm::Slurm>::default(),
        Box::<ray::Ray>::default(),
    ]
}

/// The shard `r2e build` builds when its engine says so in its environment (`--shards N`: the
/// number of shards, whose index the engine gives).
pub fn shard_from_env(shards: Option<u32>) -> Option<Result<Shard>> {
    let var = |name: &str| std::env::var(name).ok();
    r2e_pipeline::cluster::shard_from_env(&engines(), &var, shards)
}
