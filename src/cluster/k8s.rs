//! `r2e cluster k8s`: the Kubernetes manifests that build a pipeline on a cluster. An
//! **Indexed Job** (`completionMode: Indexed`) runs one pod per shard: Kubernetes gives each pod
//! its index in `JOB_COMPLETION_INDEX`, which `r2e build --shards N` takes as the shard (each
//! pod with its own local cache, the results in the remote cache), and retries a failed index
//! alone (`backoffLimitPerIndex`). The **assemble** Job is created suspended: once the shards'
//! Job is complete it is resumed, and builds the dataset from their stored results. The
//! pipeline file travels in a ConfigMap; the remote store's credentials (and a signing key)
//! come from a Secret named by the user, never from a manifest.
//!
//! Printed as YAML documents on stdout, or (`--apply`) applied with `kubectl`, which then
//! follows the shards' Job to its end, resumes the assemble and follows it too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use r2e_core::cache::Scheme;
use r2e_core::config::{RemoteCache, RepoSource, Shard};
use r2e_core::error::{Error, Result};
use r2e_pipeline::cluster::{self, Engine, Follow, Job, JobStatus, Jobs, Plan, Poll};

/// Where a pod's folders are mounted, under the mount root (`--mount-root`, default `/r2e`).
const PIPELINE_DIR: &str = "pipeline";
/// The shard plan's file in the pipeline's ConfigMap (`--plan`).
const PLAN_FILE: &str = "plan.json";
const CACHE_DIR: &str = "cache";
const OUT_DIR: &str = "out";

// What `r2e cluster k8s` was asked: its arguments, declared here once (no doc comment: the
// command flattens this struct, and a flattened struct's doc comment would become its `about`).
#[derive(Default, clap::Args)]
pub struct K8sOptions {
    /// The pipeline file (the command's PIPELINE, resolved).
    #[arg(skip)]
    pub pipeline: PathBuf,
    /// How many shards (the Indexed Job's completions).
    #[arg(long, value_name = "N")]
    pub shards: u32,
    /// The container image that holds r2e, Python and bubblewrap.
    #[arg(long)]
    pub image: String,
    /// The r2e program in the image.
    #[arg(long, value_name = "PATH", default_value = "r2e")]
    pub r2e: String,
    /// The Secret whose keys become the pods' environment: the remote store's credentials
    /// (`AWS_ACCESS_KEY_ID`, ...) and the signing key's variable, if any.
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,
    /// The remote cache (default: the pipeline's `[cache] remote`).
    #[arg(long, value_name = "URL")]
    pub remote_cache: Option<String>,
    /// For a `file://` remote cache: the PersistentVolumeClaim every pod mounts at its path.
    #[arg(long, value_name = "CLAIM")]
    pub store_claim: Option<String>,
    /// The PersistentVolumeClaim the assemble writes the dataset into (else its pod's own
    /// folder, gone with the pod).
    #[arg(long, value_name = "CLAIM")]
    pub output_claim: Option<String>,
    /// The Jobs' name prefix (default: `r2e-<project>-<hash of the manifests>`).
    #[arg(long)]
    pub name: Option<String>,
    /// The namespace of the Jobs and the ConfigMap (default: `kubectl`'s).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Each pod's CPU request (`2`, `500m`).
    #[arg(long, value_name = "QUANTITY")]
    pub cpus: Option<String>,
    /// Each pod's memory request and limit (`8Gi`).
    #[arg(long, value_name = "QUANTITY")]
    pub memory: Option<String>,
    /// Retries of a failed shard before it counts as failed.
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub backoff_limit_per_index: u32,
    /// Pods at once (default: every shard).
    #[arg(long, value_name = "P")]
    pub parallelism: Option<u32>,
    /// Where the pods' folders (pipeline, cache, output) are mounted.
    #[arg(long, value_name = "DIR", default_value = "/r2e")]
    pub mount_root: PathBuf,
    /// The pipeline's path inside the image, instead of a ConfigMap of the file (for a
    /// pipeline whose repositories are folders built into the image).
    #[arg(long, value_name = "PATH")]
    pub pipeline_in_image: Option<PathBuf>,
    /// Run the pods privileged (bubblewrap needs user namespaces, which some clusters only
    /// give a privileged pod).
    #[arg(long)]
    pub privileged: bool,
    /// The shard plan the shards follow (`r2e status --plan N --json`): it travels in the
    /// pipeline's ConfigMap.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
}

/// The manifests: a ConfigMap of the pipeline (unless it is in the image), the shards' Indexed
/// Job, and the suspended assemble Job.
pub struct Manifests {
    pub documents: Vec<Value>,
    pub shards_job: String,
    pub assemble_job: String,
    pub namespace: Option<String>,
}

/// The Kubernetes engine: its options, the manifests once made, and what it said of the Job it
/// follows.
#[derive(Default)]
pub struct K8s {
    pub opts: K8sOptions,
    manifests: Option<Manifests>,
    /// The last progress said of the Job followed, and since when it is followed.
    said: String,
    started: Option<Instant>,
    /// Since when reading the Job fails.
    failing: Option<Instant>,
}

/// `r2e cluster k8s`: the manifests as YAML, or (`apply`) applied and followed: the lines
/// saying both Jobs completed.
pub fn run(opts: K8sOptions, apply: bool) -> Result<String> {
    let (pipeline, shards, cost) = (opts.pipeline.clone(), opts.shards, opts.plan.clone());
    let mut k8s = K8s {
        opts,
        ..K8s::default()
    };
    match cluster::drive(&mut k8s, &pipeline, shards, cost.as_deref(), apply)? {
        cluster::Outcome::Shown(text) => Ok(text),
        // A failed Job ends the run with an error (`poll`): the assemble completed.
        cluster::Outcome::Ran { .. } => {
            let m = k8s.manifests.as_ref().expect("rendered");
            Ok(format!(
                "job/{} complete\njob/{} complete\n",
                m.shards_job, m.assemble_job
            ))
        }
    }
}

impl Engine for K8s {
    fn name(&self) -> &'static str {
        "k8s"
    }

    /// A pod of an Indexed Job: `JOB_COMPLETION_INDEX` of `r2e build --shards N`.
    fn shard_from_env(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
        shards: Option<u32>,
    ) -> Option<Result<Shard>> {
        let count = shards?;
        let Some(index) = var("JOB_COMPLETION_INDEX") else {
            return Some(Err(Error::input(format!(
                "`--shards {count}` takes the shard's index from JOB_COMPLETION_INDEX (set in a Kubernetes Indexed Job's pods), which is not set here: give `--shard I/{count}`"
            ))));
        };
        Some(Shard::parse(&format!("{index}/{count}")).map_err(|e| {
            Error::input(format!(
                "JOB_COMPLETION_INDEX and --shards: {e} (give `--shard I/N`)"
            ))
        }))
    }

    fn check(&self) -> Result<()> {
        let image = &self.opts.image;
        if image.trim().is_empty() || image.contains(char::is_whitespace) {
            return Err(Error::input(
                "`--image` must name the container image that holds r2e (one word)",
            ));
        }
        Ok(())
    }

    fn render(&mut self, plan: &Plan) -> Result<Jobs> {
        let m = manifests(&self.opts, plan)?;
        let job = |name: &str| Job {
            name: name.to_owned(),
            shard: None,
        };
        let jobs = Jobs {
            shards: vec![job(&m.shards_job)],
            assemble: job(&m.assemble_job),
        };
        self.manifests = Some(m);
        Ok(jobs)
    }

    fn show(&self) -> String {
        to_yaml(self.manifests.as_ref().expect("rendered"))
    }

    fn follow(&self) -> Follow {
        Follow::Driver
    }

    /// Kubernetes retries a failed index itself (`backoffLimitPerIndex`).
    fn retries(&self) -> u32 {
        0
    }

    /// The shards: every manifest applied (the assemble suspended); the assemble: resumed.
    fn submit(&mut self, job: &Job, _attempt: u32, _after: &[String]) -> Result<String> {
        let m = self.manifests.as_ref().expect("rendered");
        if job.name == m.shards_job {
            apply(m)?;
        } else {
            resume(m)?;
        }
        self.said.clear();
        self.started = Some(Instant::now());
        self.failing = None;
        Ok(format!("job/{}", job.name))
    }

    /// One read of the Job: complete, failed (an error, naming its failed indexes), or going
    /// on; its progress said on stderr when it changed. Failed reads (the API server
    /// restarting, a token renewed) are waited out for five minutes.
    fn poll(&mut self, job: &Job, _id: &str) -> Result<Option<Poll>> {
        let m = self.manifests.as_ref().expect("rendered");
        let shards = job.name == m.shards_job;
        let resume = resume_command(m);
        self.look(&job.name).map_err(|e| {
            if shards {
                Error::env(format!(
                    "{e}\n(the assemble stays suspended; once the shards' Job is complete, resume it with `{resume}`)"
                ))
            } else {
                e
            }
        })
    }

    fn pause(&mut self) -> Result<()> {
        std::thread::sleep(Duration::from_secs(5));
        Ok(())
    }

    /// The Jobs stay: `kubectl` follows or deletes them.
    fn stop(&mut self, _job: &Job, _id: &str) -> Option<std::result::Result<(), String>> {
        None
    }
}

/// Checks the options against the pipeline, and makes the manifests.
fn manifests(opts: &K8sOptions, plan: &Plan) -> Result<Manifests> {
    let cfg = &plan.cfg;
    let remote = match &opts.remote_cache {
        Some(url) => RemoteCache::parse(url).map_err(Error::input)?,
        None => cfg.remote.clone().ok_or_else(|| {
            Error::input(format!(
                "the shards need a remote cache to leave their results in: give `--remote-cache URL` or `[cache] remote` in `{}`",
                cfg.file.display()
            ))
        })?,
    };
    let store_path = match Scheme::of(&remote.url) {
        Some((Scheme::File, path)) => Some(PathBuf::from(path)),
        _ => None,
    };
    if store_path.is_some() && opts.store_claim.is_none() {
        return Err(Error::input(format!(
            "the remote cache `{}` is a folder: give `--store-claim CLAIM`, the PersistentVolumeClaim every pod mounts there",
            remote.url
        )));
    }
    for (what, value) in [
        ("--secret", &opts.secret),
        ("--store-claim", &opts.store_claim),
        ("--output-claim", &opts.output_claim),
    ] {
        if let Some(v) = value {
            check_name(what, v, Name::Subdomain, 253)?;
        }
    }
    if let Some(ns) = &opts.namespace {
        check_name("--namespace", ns, Name::Label, 63)?;
    }
    if let Some((var, _)) = cfg.remote.as_ref().and_then(|r| r.signing_key_env.as_ref())
        && opts.secret.is_none()
    {
        eprintln!(
            "warning: the pipeline signs its remote entries with the key in `{var}`, and no `--secret` gives the pods their environment: name a Secret that holds `{var}`"
        );
    }
    if opts.output_claim.is_none() {
        eprintln!(
            "warning: without `--output-claim` the assemble writes the dataset into its pod's own folder, which goes with the pod: name a PersistentVolumeClaim to keep it"
        );
    }
    for (what, value) in [("--cpus", &opts.cpus), ("--memory", &opts.memory)] {
        if let Some(v) = value
            && !is_quantity(v)
        {
            return Err(Error::input(format!(
                "`{what} {v}` is not a Kubernetes quantity (`2`, `500m`, `8Gi`)"
            )));
        }
    }
    if !opts.mount_root.is_absolute() {
        return Err(Error::input("`--mount-root` must be an absolute path"));
    }
    let text = std::fs::read_to_string(&cfg.file)
        .map_err(|e| Error::input(format!("{}: {e}", cfg.file.display())))?;
    // A pod of the Indexed Job is named and has the hostname `<name>-shards-<index>`, a label
    // of at most 63 characters.
    let longest = 63 - "-shards-".len() - (plan.shards - 1).to_string().len();
    if let Some(name) = &opts.name {
        check_name("--name", name, Name::Label, longest)?;
    }
    if opts.pipeline_in_image.is_none() {
        let local: Vec<&str> = cfg
            .repos
            .iter()
            .filter(|r| match &r.source {
                RepoSource::Path(_) => true,
                RepoSource::Git { url, .. } => !["https://", "http://", "ssh://", "git://", "git@"]
                    .iter()
                    .any(|s| url.starts_with(s)),
                // The pods ask the index themselves.
                RepoSource::Pypi(_) => false,
            })
            .map(|r| r.name.as_str())
            .collect();
        if !local.is_empty() {
            eprintln!(
                "warning: the pods get the pipeline file alone (a ConfigMap), and it names folders beside it ({}): build them into the image and give `--pipeline-in-image PATH`, or name the repositories by git URL",
                local.join(", ")
            );
        }
    }

    // A pipeline whose repositories come from `[[source]]` searches needs its `repos.lock`
    // beside it in the pods: it travels in the same ConfigMap.
    let lock = if cfg.sources.is_empty() || opts.pipeline_in_image.is_some() {
        None
    } else {
        let file = r2e_core::curation::lock_path(&cfg.file);
        Some(
            std::fs::read_to_string(&file)
                .map_err(|e| Error::input(format!("{}: {e}", file.display())))?,
        )
    };
    let cost = plan.cost.as_ref().map(|c| c.text.as_str());
    if cost.is_some() && opts.pipeline_in_image.is_some() {
        return Err(Error::input(
            "`--plan` travels in the pipeline's ConfigMap, which `--pipeline-in-image` does without: build the plan's repositories into the image's pipeline, or give the pipeline by ConfigMap",
        ));
    }
    let render = |name: &str| {
        render(
            opts,
            (&text, lock.as_deref(), cost),
            &remote,
            store_path.as_deref(),
            name,
        )
    };
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => {
            // The hash of what the manifests say (but their names): a change of the pipeline,
            // the image, the resources or the store makes new Jobs, as a Job's template cannot
            // change; the same manifests keep their names.
            let rendered =
                serde_json::to_string(&render("r2e-name").documents).expect("manifests serialize");
            default_name(&cfg.name, &rendered, longest)
        }
    };
    Ok(render(&name))
}

/// The manifests named `name`.
fn render(
    opts: &K8sOptions,
    (text, lock, cost): (&str, Option<&str>, Option<&str>),
    remote: &RemoteCache,
    store_path: Option<&Path>,
    name: &str,
) -> Manifests {
    let root = &opts.mount_root;
    let pipeline_in_pod = match &opts.pipeline_in_image {
        Some(p) => p.clone(),
        None => root.join(PIPELINE_DIR).join("pipeline.toml"),
    };
    let output = root.join(OUT_DIR).join("dataset");
    let mut build = vec![
        opts.r2e.clone(),
        "build".into(),
        path(&pipeline_in_pod),
        "--cache".into(),
        path(&root.join(CACHE_DIR)),
        "--output".into(),
        path(&output),
        "--remote-cache".into(),
        remote.url.clone(),
    ];
    let assemble_cmd = build.clone();
    build.extend(["--shards".into(), opts.shards.to_string()]);
    if cost.is_some() {
        build.extend([
            "--plan".into(),
            path(&root.join(PIPELINE_DIR).join(PLAN_FILE)),
        ]);
    }

    let labels = json!({
        "app.kubernetes.io/name": "r2e",
        "app.kubernetes.io/instance": name,
    });
    let meta = |job: &str, component: &str| {
        let mut m = json!({
            "name": job,
            "labels": labels.clone(),
        });
        m["labels"]["app.kubernetes.io/component"] = json!(component);
        if let Some(ns) = &opts.namespace {
            m["namespace"] = json!(ns);
        }
        m
    };
    let config_map = format!("{name}-pipeline");
    let (volumes, mounts, resources) = pod_parts(opts, &config_map, store_path);
    let container = |role: &str, command: &[String], out_volume: &str| {
        let mut c = json!({
            "name": role,
            "image": opts.image,
            "command": command,
            "resources": resources.clone(),
            "volumeMounts": mounts.iter().cloned().chain([json!({
                "name": out_volume,
                "mountPath": path(&root.join(OUT_DIR)),
            })]).collect::<Vec<_>>(),
        });
        if let Some(secret) = &opts.secret {
            c["envFrom"] = json!([{"secretRef": {"name": secret}}]);
        }
        if opts.privileged {
            c["securityContext"] = json!({"privileged": true});
        }
        c
    };
    let mut shard_container = container("shard", &build, "out");
    // Kubernetes sets it in every pod of an Indexed Job; named here so that the manifest says
    // where the shard comes from.
    shard_container["env"] = json!([{
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }},
    }]);
    let shards_job = format!("{name}-shards");
    let shards = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(&shards_job, "shards"),
        "spec": {
            "completionMode": "Indexed",
            "completions": opts.shards,
            "parallelism": opts.parallelism.unwrap_or(opts.shards).clamp(1, opts.shards),
            "backoffLimitPerIndex": opts.backoff_limit_per_index,
            "template": {
                "metadata": {"labels": meta(&shards_job, "shards")["labels"].clone()},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [shard_container],
                    "volumes": volumes.iter().cloned().chain([json!({"name": "out", "emptyDir": {}})]).collect::<Vec<_>>(),
                },
            },
        },
    });
    let out_volume = match &opts.output_claim {
        Some(claim) => json!({"name": "out", "persistentVolumeClaim": {"claimName": claim}}),
        None => json!({"name": "out", "emptyDir": {}}),
    };
    let assemble_job = format!("{name}-assemble");
    let assemble = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(&assemble_job, "assemble"),
        "spec": {
            // Resumed once the shards' Job is complete (`--apply` does it).
            "suspend": true,
            "backoffLimit": opts.backoff_limit_per_index,
            "template": {
                "metadata": {"labels": meta(&assemble_job, "assemble")["labels"].clone()},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container("assemble", &assemble_cmd, "out")],
                    "volumes": volumes.iter().cloned().chain([out_volume]).collect::<Vec<_>>(),
                },
            },
        },
    });
    let mut documents = Vec::new();
    if opts.pipeline_in_image.is_none() {
        // The pipeline file, and its `repos.lock` when it has one.
        let mut data = json!({"pipeline.toml": text});
        if let Some(lock) = lock {
            data[r2e_core::curation::LOCK_FILE] = json!(lock);
        }
        if let Some(cost) = cost {
            data[PLAN_FILE] = json!(cost);
        }
        documents.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(&config_map, "pipeline"),
            "data": data,
        }));
    }
    documents.push(shards);
    documents.push(assemble);
    Manifests {
        documents,
        shards_job,
        assemble_job,
        namespace: opts.namespace.clone(),
    }
}

/// What every pod has: its volumes and their mounts (the local cache, the pipeline's
/// ConfigMap `config_map` unless the pipeline is in the image, a `file://` store's claim), and
/// its resources.
fn pod_parts(
    opts: &K8sOptions,
    config_map: &str,
    store_path: Option<&Path>,
) -> (Vec<Value>, Vec<Value>, Value) {
    let root = &opts.mount_root;
    let mut volumes = vec![json!({"name": "cache", "emptyDir": {}})];
    let mut mounts = vec![json!({"name": "cache", "mountPath": path(&root.join(CACHE_DIR))})];
    if opts.pipeline_in_image.is_none() {
        volumes.push(json!({"name": "pipeline", "configMap": {"name": config_map}}));
        mounts.push(json!({
            "name": "pipeline",
            "mountPath": path(&root.join(PIPELINE_DIR)),
            "readOnly": true,
        }));
    }
    if let (Some(claim), Some(at)) = (&opts.store_claim, store_path) {
        volumes.push(json!({"name": "store", "persistentVolumeClaim": {"claimName": claim}}));
        mounts.push(json!({"name": "store", "mountPath": path(at)}));
    }
    let mut resources = json!({});
    if let Some(c) = &opts.cpus {
        resources["requests"]["cpu"] = json!(c);
    }
    if let Some(m) = &opts.memory {
        resources["requests"]["memory"] = json!(m);
        resources["limits"]["memory"] = json!(m);
    }
    (volumes, mounts, resources)
}

/// The manifests as YAML documents, with how to run them by hand.
fn to_yaml(m: &Manifests) -> String {
    let ns = m
        .namespace
        .as_ref()
        .map(|n| format!(" -n {n}"))
        .unwrap_or_default();
    let mut out = format!(
        "# Written by `r2e cluster k8s`. Apply these, wait for the shards, then resume the assemble:\n\
         #   kubectl{ns} apply -f THIS.yaml\n\
         #   kubectl{ns} wait --for=condition=complete --timeout=-1s job/{}\n\
         #   kubectl{ns} patch job/{} --type=merge -p '{{\"spec\":{{\"suspend\":false}}}}'\n\
         # (`r2e cluster k8s --apply` does all three.)\n",
        m.shards_job, m.assemble_job
    );
    for doc in &m.documents {
        out.push_str("---\n");
        yaml(doc, 0, &mut out);
    }
    out
}

/// Applies the manifests with `kubectl` (the assemble suspended).
fn apply(m: &Manifests) -> Result<()> {
    let yaml = to_yaml(m);
    let mut child = kubectl(m)
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .map_err(kubectl_missing)?;
    let written = {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(yaml.as_bytes())
    };
    let status = child.wait()?;
    written?;
    if !status.success() {
        return Err(Error::env(format!("`kubectl apply` failed ({status})")));
    }
    Ok(())
}

/// Resumes the assemble.
fn resume(m: &Manifests) -> Result<()> {
    run_kubectl(
        m,
        &[
            "patch",
            &format!("job/{}", m.assemble_job),
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ],
    )
    .map(drop)
}

/// What resumes the assemble by hand.
fn resume_command(m: &Manifests) -> String {
    format!(
        "kubectl{} patch job/{} --type=merge -p '{{\"spec\":{{\"suspend\":false}}}}'",
        m.namespace
            .as_ref()
            .map(|n| format!(" -n {n}"))
            .unwrap_or_default(),
        m.assemble_job
    )
}

fn kubectl(m: &Manifests) -> Command {
    let mut cmd = Command::new("kubectl");
    if let Some(ns) = &m.namespace {
        cmd.args(["-n", ns]);
    }
    cmd
}

fn kubectl_missing(e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::env("`kubectl` not found: install it, or print the manifests without `--apply`")
    } else {
        Error::env(format!("cannot run `kubectl`: {e}"))
    }
}

fn run_kubectl(m: &Manifests, args: &[&str]) -> Result<String> {
    let out = kubectl(m).args(args).output().map_err(kubectl_missing)?;
    if !out.status.success() {
        return Err(Error::env(format!(
            "`kubectl {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl K8s {
    /// One read of `job`: how it goes (`None` when it cannot be read, for up to [`GRACE`]), or
    /// an error naming its failed indexes when it failed.
    fn look(&mut self, job: &str) -> Result<Option<Poll>> {
        let m = self.manifests.as_ref().expect("rendered");
        let text = match run_kubectl(m, &["get", &format!("job/{job}"), "-o", "json"]) {
            Ok(text) => {
                self.failing = None;
                text
            }
            Err(e) => {
                let since = *self.failing.get_or_insert_with(Instant::now);
                if since.elapsed() > GRACE {
                    return Err(e);
                }
                eprintln!("warning: {e}; trying again");
                return Ok(None);
            }
        };
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Error::env(format!("`kubectl get job/{job}` printed no JSON: {e}")))?;
        let status = &v["status"];
        let now = format!(
            "job/{job}: {} succeeded, {} active, {} failed{}",
            status["succeeded"].as_u64().unwrap_or(0),
            status["active"].as_u64().unwrap_or(0),
            status["failed"].as_u64().unwrap_or(0),
            status["failedIndexes"]
                .as_str()
                .map(|f| format!(" (failed indexes {f})"))
                .unwrap_or_default()
        );
        if now != self.said {
            let started = self.started.get_or_insert_with(Instant::now);
            eprintln!("{now} [{}s]", started.elapsed().as_secs());
            self.said = now;
        }
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let holds = |kind: &str| {
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        };
        if holds("Complete") {
            return Ok(Some(Poll {
                status: JobStatus::Succeeded,
                message: self.said.clone(),
            }));
        }
        if holds("Failed") {
            return Err(Error::env(format!(
                "job/{job} failed: {} (its pods' logs: `kubectl logs -l app.kubernetes.io/instance` and `kubectl describe job/{job}`)",
                self.said
            )));
        }
        Ok(Some(Poll {
            status: JobStatus::Running,
            message: self.said.clone(),
        }))
    }
}

/// How long failed reads of a Job (the API server restarting, a token renewed) are waited
/// out before giving up.
const GRACE: Duration = Duration::from_secs(300);

/// `r2e-<project>-<8 hex>`, at most `longest` characters: the hex of `rendered`, what the
/// manifests say.
fn default_name(project: &str, rendered: &str, longest: usize) -> String {
    let hash = blake3::hash(rendered.as_bytes()).to_hex();
    let room = longest.saturating_sub("r2e--".len() + 8);
    let mut slug: String = project
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    slug = slug.trim_matches('-').to_owned();
    slug.truncate(room.min(30));
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        format!("r2e-{}", &hash[..8])
    } else {
        format!("r2e-{slug}-{}", &hash[..8])
    }
}

/// What Kubernetes takes as a name: a label (RFC 1123: lowercase letters, digits and `-`,
/// starting and ending with a letter or digit), or a subdomain (labels joined by `.`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Name {
    Label,
    Subdomain,
}

/// Checks `name` as `kind`, of at most `max` characters.
fn check_name(what: &str, name: &str, kind: Name, max: usize) -> Result<()> {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && l.starts_with(|c: char| c.is_ascii_alphanumeric())
            && l.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let ok = name.len() <= max
        && match kind {
            Name::Label => label(name),
            Name::Subdomain => name.split('.').all(label),
        };
    if ok {
        Ok(())
    } else {
        let dots = if kind == Name::Subdomain {
            " (dot-separated parts of those)"
        } else {
            ""
        };
        Err(Error::input(format!(
            "`{what} {name}` is not a Kubernetes name: lowercase letters, digits and `-`, starting and ending with a letter or digit{dots}, at most {max} characters"
        )))
    }
}

/// A Kubernetes quantity: a number with an optional suffix (`2`, `0.5`, `500m`, `8Gi`, `1e3`).
fn is_quantity(s: &str) -> bool {
    const SUFFIXES: [&str; 14] = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E", "",
    ];
    SUFFIXES.iter().any(|suffix| {
        s.strip_suffix(suffix).is_some_and(|n| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && n.bytes().filter(|&b| b == b'.').count() <= 1
                && !n.starts_with('.')
                && !n.ends_with('.')
        })
    })
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Writes `v` as block YAML at `indent`. Strings are double-quoted JSON strings (a subset of
/// YAML's double-quoted scalars), so that no value is read as another type; keys plain when
/// they are simple words.
fn yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, val) in map {
                out.push_str(&pad);
                out.push_str(&key(k));
                out.push(':');
                nested(val, indent, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push('-');
                match item {
                    Value::Object(map) if !map.is_empty() => {
                        // The first key on the dash's line, the others under it.
                        let mut first = true;
                        for (k, val) in map {
                            if first {
                                out.push(' ');
                                first = false;
                            } else {
                                out.push_str(&" ".repeat(indent + 2));
                            }
                            out.push_str(&key(k));
                            out.push(':');
                            nested(val, indent + 2, out);
                        }
                    }
                    _ => nested(item, indent, out),
                }
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

/// A value after `key:` or `-`: on the same line when it is a scalar or empty, else below.
fn nested(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            yaml(v, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            yaml(v, indent + 2, out);
        }
        _ => {
            out.push(' ');
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        Value::String(s) if is_plain(s) => s.clone(),
        Value::String(s) => quoted(s),
        other => other.to_string(),
    }
}

/// A string as a YAML double-quoted scalar: JSON's escapes, and besides them the characters
/// YAML reads as line breaks (U+0085, U+2028, U+2029) or refuses raw (U+007F to U+009F,
/// U+FEFF) as `\uXXXX`, so that the text reads back as it is.
fn quoted(s: &str) -> String {
    let json = Value::String(s.to_owned()).to_string();
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether a string reads back as itself, a string, unquoted: a word of letters, digits and
/// `_ . / -`, starting with a letter, that YAML 1.1 does not read as a boolean or null.
fn is_plain(s: &str) -> bool {
    const SPECIAL: [&str; 11] = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf",
    ];
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        && !SPECIAL.contains(&s.to_ascii_lowercase().as_str())
}

fn key(k: &str) -> String {
    if is_plain(k) { k.to_owned() } else { quoted(k) }
}
