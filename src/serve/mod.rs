//! `r2e serve`: a built dataset as an environment for programming agents, over HTTP/JSON.
//!
//! An agent opens a session on an instance and gets a workspace: the repository at the
//! instance's commit, the target's body replaced by its signature, spec and
//! `raise NotImplementedError` (`workspace`). It reads and writes files there, runs commands in
//! the sandbox, runs the tests and submits. Tests and submissions go through the one check path
//! ([`r2e_pipeline::bench::Bench`]): only the target function is taken from the workspace's file and
//! spliced into the original module, and the candidate's process cannot see the reference. The
//! checks of many sessions are batched into warm workers (`checker`). Every action and what it
//! observed is appended to the session's trace (`trace`).
//!
//! The server's state is the open sessions; each holds a lock that its operations take in turn,
//! so an agent's requests on one session never overlap, and closing (by the agent, an idle
//! timeout, a submission or shutdown) waits for the operation in flight.

mod checker;
mod openapi;
pub mod trace;
pub mod workspace;

use r2e_core::records::TraceLine;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use r2e_core::config::{Config, SandboxConfig, ServeConfig};
use r2e_core::error::{Error, Result};
use r2e_core::records::BugfixTask;
use r2e_core::records::CheckOutcome;
use r2e_core::records::Feedback;
use r2e_exec::checkpath::{TestVerdict, Verdict};
use r2e_exec::sandbox::Sandbox;
use r2e_exec::services::Services;
use r2e_pipeline::bench::Bench;

use r2e_core::records::CloseReason;
use trace::Trace;

/// `r2e serve`'s options from the command line.
#[derive(Clone, Debug)]
pub struct Options {
    pub addr: SocketAddr,
    /// The environment variable holding the bearer token every request must carry.
    pub token_env: Option<String>,
    pub max_sessions: usize,
    pub idle_timeout: Duration,
}

/// An error as the API answers it: a status and a JSON body `{"error": message}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// The error as a trace records what the agent observed.
    fn observation(&self) -> Value {
        json!({"error": self.message, "status": self.status.as_u16()})
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        match e {
            Error::Input(m) => ApiError::bad(m),
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response =
            (self.status, axum::Json(json!({ "error": self.message }))).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

type ApiResult<T> = std::result::Result<T, ApiError>;

/// One open session.
struct Live {
    id: String,
    /// The instance's place in the bench.
    ix: usize,
    /// A bug-fix session's task (its place in `Server::tasks`).
    task: Option<usize>,
    workspace: PathBuf,
    /// What its workspace may hold (`[serve] workspace_limit` and the rest).
    quota: workspace::Quota,
    trace: Trace,
    /// Taken by each operation in turn; `true` once the session is closed.
    state: Arc<tokio::sync::Mutex<bool>>,
    last_used: Mutex<Instant>,
    /// The number of the next action in the trace.
    seq: AtomicUsize,
}

impl Live {
    fn touch(&self) {
        *self.last_used.lock().expect("clock lock") = Instant::now();
    }

    fn idle(&self) -> Duration {
        self.last_used.lock().expect("clock lock").elapsed()
    }

    /// Appends an action and what the agent observed to the trace.
    fn record(
        &self,
        op: &str,
        request: Value,
        observation: &Value,
        started: Instant,
        durable: bool,
    ) -> ApiResult<()> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.trace
            .append(
                &TraceLine::Action {
                    seq,
                    op: op.to_owned(),
                    request,
                    observation: observation.clone(),
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                    time: trace::now(),
                },
                durable,
            )
            .map_err(ApiError::from)
    }
}

/// The server: the dataset, the sandbox, the open sessions.
struct Server {
    bench: Arc<Bench>,
    sandbox: Arc<dyn Sandbox>,
    /// `[sandbox]`: the limits of a command's job.
    sandbox_settings: SandboxConfig,
    settings: ServeConfig,
    opts: Options,
    token: Option<blake3::Hash>,
    traces: PathBuf,
    sessions_dir: PathBuf,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    /// Sessions being opened (counted against the limit).
    opening: AtomicUsize,
    checker: checker::Checker,
    /// `/openapi.json`, made once (it lists the instances).
    openapi: Value,
    /// The output's bug-fix tasks (`bugfix.jsonl`; none without `[bugfix]`): a session opened
    /// on one starts from its broken state and is judged on its FAIL_TO_PASS and PASS_TO_PASS.
    tasks: Vec<BugfixTask>,
}

/// How long a warm worker waits for its next check before it stops.
const WARM_IDLE: Duration = Duration::from_secs(120);

/// Runs the server until SIGINT or SIGTERM.
pub fn serve(cfg: &Config, services: &Services, opts: Options) -> Result<()> {
    if !opts.addr.ip().is_loopback() && opts.token_env.is_none() {
        return Err(Error::input(format!(
            "`--addr {}` is not a loopback address: serving it needs `--token-env VAR` (a bearer token every request must carry)",
            opts.addr
        )));
    }
    let token = match &opts.token_env {
        None => None,
        Some(var) => match r2e_core::config::secret_from_env(var) {
            Some(t) => Some(blake3::hash(t.as_bytes())),
            None => {
                return Err(Error::input(format!(
                    "`--token-env {var}`: the environment variable `{var}` is not set (or empty)"
                )));
            }
        },
    };
    if opts.max_sessions == 0 {
        return Err(Error::input("`--max-sessions` must be at least 1"));
    }
    // Traces and workspaces live in the output's store, beside its generations, which builds
    // replace; one server serves an output at a time.
    let store = r2e_pipeline::engine::outputs::store_of(&cfg.output)?;
    fs_err::create_dir_all(&store)?;
    let lock = fs_err::File::create(store.join("serve.lock"))?
        .into_parts()
        .0;
    if lock.try_lock().is_err() {
        return Err(Error::env(format!(
            "another `r2e serve` serves the output `{}`",
            cfg.output.display()
        )));
    }
    // Workers stay warm across checks: a lone session's test is a forked child of a running
    // worker, not a new sandbox job.
    let bench = Arc::new(Bench::open(cfg, services)?.keep_workers_warm(WARM_IDLE));
    // The dataset is open: builds (of this output too) and `r2e gc` may take the cache while
    // the server runs.
    bench.unlock_cache();
    // An output committed before traces were linked gets its link now.
    let traces = r2e_pipeline::engine::outputs::link_traces(
        &store,
        &r2e_pipeline::engine::outputs::resolve(&cfg.output),
    )?;
    let sessions_dir = store.join("sessions");
    let closed = recover(&sessions_dir, &traces)?;
    if closed > 0 {
        eprintln!("closed {closed} session(s) that a stopped server left open");
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let tasks: Vec<BugfixTask> = r2e_core::records::read_jsonl(
        &r2e_pipeline::engine::outputs::resolve(&cfg.output)
            .join(r2e_core::records::OutputFile::Bugfix.name()),
    )?
    .unwrap_or_default();
    let server = Arc::new(Server {
        tasks,
        checker: checker::Checker::start(bench.clone(), threads),
        openapi: {
            let ids: Vec<&str> = bench.instances().iter().map(|i| i.id.as_str()).collect();
            openapi::document(&ids)
        },
        bench,
        sandbox: services.sandbox.clone(),
        sandbox_settings: cfg.sandbox.clone(),
        settings: cfg.serve.clone(),
        opts,
        token,
        traces,
        sessions_dir,
        sessions: Mutex::default(),
        opening: AtomicUsize::new(0),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::env(format!("cannot start the server's runtime: {e}")))?;
    let served = runtime.block_on(run(server));
    drop(lock);
    served
}

async fn run(server: Arc<Server>) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(server.opts.addr)
        .await
        .map_err(|e| Error::env(format!("cannot listen on {}: {e}", server.opts.addr)))?;
    let addr = listener.local_addr()?;
    let app = router(server.clone());
    tokio::spawn(reap(server.clone()));
    eprintln!(
        "serving {} instances; listening on http://{addr}",
        server.bench.instances().len()
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| Error::env(format!("the server failed: {e}")))?;
    let open: Vec<String> = server
        .sessions
        .lock()
        .expect("sessions")
        .keys()
        .cloned()
        .collect();
    for sid in open {
        let _ = close(&server, &sid, CloseReason::Shutdown).await;
    }
    server.bench.stop_workers();
    let (candidates, batches) = server.checker.stats();
    let (started, answered) = server.bench.warm_stats();
    eprintln!(
        "stopped; checked {candidates} candidates in {batches} batches; {started} warm workers answered {answered} requests"
    );
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Removes the workspaces a killed server left, and closes their traces (reason `restart`).
/// Returns how many sessions it closed.
fn recover(sessions_dir: &Path, traces: &Path) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(sessions_dir) else {
        return Ok(0);
    };
    let mut closed = 0;
    for entry in entries {
        let entry = entry?;
        let sid = entry.file_name().to_string_lossy().into_owned();
        fs_err::remove_dir_all(entry.path())?;
        if trace::close_orphan(traces, &sid)? {
            closed += 1;
        }
    }
    Ok(closed)
}

/// Closes idle sessions, every few seconds.
async fn reap(server: Arc<Server>) {
    let idle = server.opts.idle_timeout;
    let tick = (idle / 4).clamp(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        tokio::time::sleep(tick).await;
        let stale: Vec<String> = server
            .sessions
            .lock()
            .expect("sessions")
            .values()
            // A session with an operation in flight is not idle.
            .filter(|l| l.idle() >= idle && l.state.try_lock().is_ok())
            .map(|l| l.id.clone())
            .collect();
        for sid in stale {
            let _ = close(&server, &sid, CloseReason::Idle).await;
        }
    }
}

/// Closes a session: it leaves the table, the operation in flight ends, its workspace is
/// removed and its trace closed. `None` when there is no such session.
async fn close(server: &Server, sid: &str, reason: CloseReason) -> Option<ApiResult<()>> {
    let live = server.sessions.lock().expect("sessions").remove(sid)?;
    let mut closed = live.state.clone().lock_owned().await;
    *closed = true;
    Some(finish(&live, reason))
}

/// Closes a closed session's trace, then removes its workspace: a server killed in between
/// leaves a workspace, which the next start removes, and never a session that is gone without
/// its close line.
fn finish(live: &Live, reason: CloseReason) -> ApiResult<()> {
    live.trace.close(reason)?;
    fs_err::remove_dir_all(&live.workspace)
        .map_err(|e| ApiError::internal(format!("cannot remove the session's workspace: {e}")))
}

fn router(server: Arc<Server>) -> Router {
    let body_limit = server.settings.max_file_bytes as usize + 64 * 1024;
    Router::new()
        .route("/openapi.json", get(openapi_doc))
        .route("/v1/instances", get(list_instances))
        .route("/v1/sessions", post(open_session).get(list_sessions))
        .route("/v1/sessions/{sid}", axum::routing::delete(close_session))
        .route(
            "/v1/sessions/{sid}/files/{*path}",
            get(read_file).put(write_file),
        )
        .route("/v1/sessions/{sid}/exec", post(exec))
        .route("/v1/sessions/{sid}/test", post(test))
        .route("/v1/sessions/{sid}/submit", post(submit))
        .fallback(|| async { ApiError::not_found("no such route (see /openapi.json)") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this route takes another method (see /openapi.json)",
            )
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(server.clone(), authorize))
        .with_state(server)
}

/// Every request carries the bearer token when the server has one; compared in constant time
/// (as blake3 hashes, whose equality is constant-time).
async fn authorize(State(server): State<Arc<Server>>, request: Request, next: Next) -> Response {
    if let Some(want) = &server.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| blake3::hash(t.trim().as_bytes()));
        if given.as_ref() != Some(want) {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "a valid bearer token is needed (`Authorization: Bearer TOKEN`)",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// A request body as bytes, or the API's error for it (too large: 413).
fn body(b: std::result::Result<Bytes, BytesRejection>) -> ApiResult<Bytes> {
    b.map_err(|e| ApiError::new(e.status(), e.body_text()))
}

/// A JSON request body; an empty body is `{}`.
fn json_body<T: for<'de> Deserialize<'de>>(
    b: std::result::Result<Bytes, BytesRejection>,
) -> ApiResult<T> {
    let bytes = body(b)?;
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &bytes
    };
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad(format!("the request body is not the JSON expected: {e}")))
}

async fn openapi_doc(State(server): State<Arc<Server>>) -> axum::Json<Value> {
    axum::Json(server.openapi.clone())
}

async fn list_instances(State(server): State<Arc<Server>>) -> axum::Json<Value> {
    let list: Vec<Value> = server
        .bench
        .instances()
        .iter()
        .map(|i| {
            json!({
                "id": i.id,
                "repo": i.repo,
                "path": i.path,
                "qualname": i.qualname,
                "spec": i.spec,
                "problem": i.problem,
                "tests": i.tests,
            })
        })
        .collect();
    let tasks: Vec<Value> = server
        .tasks
        .iter()
        .map(|t| {
            json!({
                "id": t.instance_id,
                "repo": t.repo,
                "problem_statement": t.problem_statement,
            })
        })
        .collect();
    axum::Json(json!({ "instances": list, "tasks": tasks }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenRequest {
    instance: String,
}

/// A new session id: 128 random bits, in hex.
fn session_id() -> ApiResult<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| ApiError::internal(format!("cannot read /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Counts a session being opened against the limit, and uncounts it when dropped.
struct Opening<'a>(&'a AtomicUsize);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn open_session(
    State(server): State<Arc<Server>>,
    b: std::result::Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, axum::Json<Value>)> {
    let request: OpenRequest = json_body(b)?;
    // An instance, or a bug-fix task (whose instance holds its harness).
    let task = server
        .tasks
        .iter()
        .position(|t| t.instance_id == request.instance);
    let instance_id = match task {
        Some(k) => server.tasks[k].instance.as_str(),
        None => request.instance.as_str(),
    };
    let ix = server
        .bench
        .index(instance_id)
        .map_err(|_| ApiError::not_found(format!("no instance `{}`", request.instance)))?;
    let (root, target, _) = server.bench.place(ix).map_err(|why| {
        ApiError::new(
            StatusCode::CONFLICT,
            format!("instance `{}` cannot be served: {why}", request.instance),
        )
    })?;
    {
        let sessions = server.sessions.lock().expect("sessions");
        let busy = sessions.len() + server.opening.load(Ordering::SeqCst);
        if busy >= server.opts.max_sessions {
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{busy} sessions are open, the most this server allows (`--max-sessions {}`): close one, or retry later",
                    server.opts.max_sessions
                ),
            );
            e.retry_after = Some(5);
            return Err(e);
        }
        server.opening.fetch_add(1, Ordering::SeqCst);
    }
    let _opening = Opening(&server.opening);
    let instance = &server.bench.instances()[ix];
    let sid = session_id()?;
    let workspace = server.sessions_dir.join(&sid);
    // The module as the agent finds it: the function stubbed out, or a task's broken state.
    let stub = match task {
        None => server
            .bench
            .stub_module(ix)
            .ok_or_else(|| ApiError::internal("the instance's module cannot be stubbed"))?,
        // A broken state that cannot be made here (the repository changed): a conflict.
        Some(k) => server
            .bench
            .broken_module(ix, &server.tasks[k])
            .map_err(|e| match e {
                Error::Unrunnable(why) => ApiError::new(StatusCode::CONFLICT, why),
                e => ApiError::from(e),
            })?,
    };
    let hide: Vec<PathBuf> = target
        .hide
        .iter()
        .filter_map(|h| h.strip_prefix(&target.root).ok())
        .map(|rel| root.join(rel))
        .collect();
    let copy = {
        let (root, workspace, path) =
            (root.to_path_buf(), workspace.clone(), instance.path.clone());
        tokio::task::spawn_blocking(move || {
            workspace::create(&root, &hide, &workspace, &path, &stub)
                .map(|()| workspace::usage(&workspace))
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::internal(format!("cannot make the session's workspace: {e}")))?
    };
    let trace = Trace::create(
        &server.traces,
        &sid,
        TraceLine::Open {
            session: sid.clone(),
            instance: instance.id.clone(),
            repo: instance.repo.clone(),
            commit: instance.commit.clone(),
            path: instance.path.clone(),
            qualname: instance.qualname.clone(),
            harness: instance.harness_hash.clone(),
            env_lock: instance.env_lock.clone(),
            feedback: server.settings.feedback,
            holdout: server.settings.holdout,
            task: task.map(|k| server.tasks[k].instance_id.clone()),
            time: trace::now(),
        },
    );
    let trace = match trace {
        Ok(t) => t,
        Err(e) => {
            let _ = fs_err::remove_dir_all(&workspace);
            return Err(e.into());
        }
    };
    let live = Arc::new(Live {
        id: sid.clone(),
        ix,
        task,
        workspace,
        quota: workspace::Quota::over(copy, &server.settings),
        trace,
        state: Arc::new(tokio::sync::Mutex::new(false)),
        last_used: Mutex::new(Instant::now()),
        seq: AtomicUsize::new(0),
    });
    server
        .sessions
        .lock()
        .expect("sessions")
        .insert(sid.clone(), live);
    Ok((
        StatusCode::CREATED,
        axum::Json(match task {
            None => json!({
                "session": sid,
                "instance": instance.id,
                "path": instance.path,
                "qualname": instance.qualname,
            }),
            // A bug-fix session: the report, and nothing of where the bug is.
            Some(k) => json!({
                "session": sid,
                "task": server.tasks[k].instance_id,
                "problem_statement": server.tasks[k].problem_statement,
            }),
        }),
    ))
}

async fn list_sessions(State(server): State<Arc<Server>>) -> axum::Json<Value> {
    let sessions = server.sessions.lock().expect("sessions");
    let mut list: Vec<Value> = sessions
        .values()
        .map(|l| {
            json!({
                "session": l.id,
                "instance": server.bench.instances()[l.ix].id,
                "idle_seconds": l.idle().as_secs_f64(),
            })
        })
        .collect();
    list.sort_by(|a, b| a["session"].as_str().cmp(&b["session"].as_str()));
    axum::Json(json!({ "sessions": list }))
}

async fn close_session(
    State(server): State<Arc<Server>>,
    UrlPath(sid): UrlPath<String>,
) -> ApiResult<axum::Json<Value>> {
    match close(&server, &sid, CloseReason::Closed).await {
        None => Err(no_session(&sid)),
        Some(r) => r.map(|()| axum::Json(json!({"session": sid, "closed": true}))),
    }
}

fn no_session(sid: &str) -> ApiError {
    ApiError::not_found(format!(
        "no open session `{sid}` (it was closed, or never opened)"
    ))
}

/// Runs `op` on an open session, alone among its operations, off the async threads; the session
/// is then used now. 404 when it is not open (or closes before its turn).
async fn with_session<T: Send + 'static>(
    server: &Arc<Server>,
    sid: &str,
    op: impl FnOnce(&Server, &Live) -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    let live = server
        .sessions
        .lock()
        .expect("sessions")
        .get(sid)
        .cloned()
        .ok_or_else(|| no_session(sid))?;
    let guard = live.state.clone().lock_owned().await;
    if *guard {
        return Err(no_session(sid));
    }
    let server = server.clone();
    tokio::task::spawn_blocking(move || {
        let out = op(&server, &live);
        live.touch();
        drop(guard);
        out
    })
    .await
    .map_err(|e| ApiError::internal(format!("the operation failed: {e}")))?
}

async fn read_file(
    State(server): State<Arc<Server>>,
    UrlPath((sid, path)): UrlPath<(String, String)>,
) -> ApiResult<Response> {
    let text = with_session(&server, &sid, move |server, live| {
        let started = Instant::now();
        let read = workspace::read(&live.workspace, &path, server.settings.max_file_bytes);
        let observation = match &read {
            Ok(text) => json!({"text": text}),
            Err(e) => e.observation(),
        };
        live.record("read", json!({"path": path}), &observation, started, false)?;
        read
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

async fn write_file(
    State(server): State<Arc<Server>>,
    UrlPath((sid, path)): UrlPath<(String, String)>,
    b: std::result::Result<Bytes, BytesRejection>,
) -> ApiResult<axum::Json<Value>> {
    let bytes = body(b)?;
    with_session(&server, &sid, move |server, live| {
        let started = Instant::now();
        let written = workspace::write(
            &live.workspace,
            &path,
            &bytes,
            server.settings.max_file_bytes,
            &live.quota,
        );
        let observation = match &written {
            Ok(n) => json!({"path": path, "bytes": n}),
            Err(e) => e.observation(),
        };
        live.record(
            "write",
            json!({"path": path, "text": String::from_utf8_lossy(&bytes)}),
            &observation,
            started,
            false,
        )?;
        written.map(|_| axum::Json(observation))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecRequest {
    command: String,
    #[serde(default)]
    timeout_s: Option<f64>,
}

async fn exec(
    State(server): State<Arc<Server>>,
    UrlPath(sid): UrlPath<String>,
    b: std::result::Result<Bytes, BytesRejection>,
) -> ApiResult<axum::Json<Value>> {
    let request: ExecRequest = json_body(b)?;
    let max = server.settings.max_exec_seconds;
    let seconds = match request.timeout_s {
        None => 10.min(max),
        Some(t) if t.is_finite() && t > 0.0 => (t.ceil() as u64).min(max),
        Some(t) => {
            return Err(ApiError::bad(format!(
                "`timeout_s` must be above 0 (it is {t})"
            )));
        }
    };
    with_session(&server, &sid, move |server, live| {
        let started = Instant::now();
        let (_, target, runtime) = server.bench.place(live.ix).map_err(ApiError::internal)?;
        let result = workspace::exec(
            server.sandbox.as_ref(),
            r2e_exec::jobs::limits(&server.sandbox_settings, seconds),
            &live.workspace,
            target,
            runtime,
            &request.command,
            server.settings.max_output_bytes as usize,
            &live.quota,
        )
        .map_err(|e| ApiError::internal(format!("the sandbox failed: {e}")))?;
        let observation =
            serde_json::to_value(&result).map_err(|e| ApiError::internal(e.to_string()))?;
        live.record(
            "exec",
            json!({"command": request.command, "timeout_s": seconds}),
            &observation,
            started,
            false,
        )?;
        if let Some(why) = result.refused {
            return Err(ApiError::too_large(why));
        }
        Ok(axum::Json(observation))
    })
    .await
}

/// Whether a test of an instance is held out for the reward (never shown): fixed per instance
/// and test, a `fraction` of them.
fn held_out(instance: &str, test: &str, fraction: f64) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    let h = blake3::hash(format!("r2e-holdout\0{instance}\0{test}").as_bytes());
    let x = u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"));
    (x as f64) / (u64::MAX as f64) < fraction
}

/// Checks the workspace's function through the one check path.
fn check_workspace(server: &Server, live: &Live) -> ApiResult<Verdict> {
    let instance = &server.bench.instances()[live.ix];
    let text = match workspace::read(
        &live.workspace,
        &instance.path,
        server.settings.max_file_bytes,
    ) {
        Ok(t) => t,
        Err(e) if e.status == StatusCode::NOT_FOUND || e.status == StatusCode::BAD_REQUEST => {
            return Ok(Verdict::unrunnable(format!(
                "the function's file `{}` cannot be read: {}",
                instance.path, e.message
            )));
        }
        Err(e) => return Err(e),
    };
    // A bug-fix session's file is checked whole, and judged on its task's lists.
    if let Some(k) = live.task {
        let task = &server.tasks[k];
        let prepared = match server.bench.prepare_module(live.ix, text) {
            Ok(p) => p,
            Err(Error::Unrunnable(why)) => return Ok(Verdict::error(why)),
            Err(e) => return Err(e.into()),
        };
        let verdict = match server.checker.check(prepared) {
            Ok(checked) => checked.verdict,
            Err(Error::Env(why)) => Verdict::error(why),
            Err(e) => return Err(e.into()),
        };
        return Ok(
            crate::check::judge_task(task, &task.instance_id, verdict, None)
                .check
                .verdict,
        );
    }
    let prepared = match server.bench.prepare(&instance.id, &text) {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(verdict)) => return Ok(verdict),
        // The instance cannot be checked here any more (its environment is gone): not the
        // candidate's doing.
        Err(Error::Unrunnable(why)) => return Ok(Verdict::error(why)),
        Err(e) => return Err(e.into()),
    };
    match server.checker.check(prepared) {
        Ok(checked) => Ok(checked.verdict),
        Err(Error::Env(why)) => Ok(Verdict::error(why)),
        Err(e) => Err(e.into()),
    }
}

/// One test as an agent sees it under `feedback`.
fn test_view(t: &TestVerdict, feedback: Feedback) -> Value {
    let outcome = if t.passed { "pass" } else { "fail" };
    match feedback {
        Feedback::Full => json!({
            "name": t.name,
            "outcome": outcome,
            "message": t.message,
            "inputs": t.inputs,
            "expected": t.expected,
            "actual": t.actual,
        }),
        _ => json!({"name": t.name, "outcome": outcome}),
    }
}

async fn test(
    State(server): State<Arc<Server>>,
    UrlPath(sid): UrlPath<String>,
) -> ApiResult<axum::Json<Value>> {
    with_session(&server, &sid, move |server, live| {
        let started = Instant::now();
        let verdict = check_workspace(server, live)?;
        let instance = &server.bench.instances()[live.ix];
        let holdout = server.settings.holdout;
        let visible: Vec<&TestVerdict> = verdict
            .tests
            .iter()
            .filter(|t| !held_out(&instance.id, &t.name, holdout))
            .collect();
        // The verdict has a line per expected test, or none when nothing ran.
        let total = instance
            .expected
            .iter()
            .filter(|t| !held_out(&instance.id, &t.name, holdout))
            .count();
        let feedback = server.settings.feedback;
        let tests: Vec<Value> = match feedback {
            Feedback::None => Vec::new(),
            _ => visible.iter().map(|t| test_view(t, feedback)).collect(),
        };
        let observation = json!({
            "outcome": verdict.outcome,
            "passed": visible.iter().filter(|t| t.passed).count(),
            "total": total,
            "error": verdict.error,
            "failure_class": verdict.failure_class,
            "tests": tests,
        });
        live.record("test", json!({}), &observation, started, false)?;
        Ok(axum::Json(observation))
    })
    .await
}

async fn submit(
    State(server): State<Arc<Server>>,
    UrlPath(sid): UrlPath<String>,
) -> ApiResult<axum::Json<Value>> {
    // The session leaves the table at once: no other operation starts on it.
    let live = server
        .sessions
        .lock()
        .expect("sessions")
        .remove(&sid)
        .ok_or_else(|| no_session(&sid))?;
    let mut guard = live.state.clone().lock_owned().await;
    if *guard {
        return Err(no_session(&sid));
    }
    *guard = true;
    let owner = server.clone();
    let task = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let judged = check_workspace(&owner, &live).and_then(|verdict| {
            let instance = &owner.bench.instances()[live.ix];
            let total = instance.expected.len();
            let passed = verdict.passed_tests();
            if verdict.outcome == CheckOutcome::Error {
                // Nothing was judged: no reward (a trainer masks it), the reason, and the
                // session stays open for a retry.
                let observation = json!({
                    "outcome": verdict.outcome,
                    "reward": null,
                    "passed_all": false,
                    "passed": passed,
                    "total": total,
                    "error": verdict.error,
                });
                live.record("submit", json!({}), &observation, started, false)?;
                return Ok((observation, false));
            }
            // A bug fix is rewarded whole: every FAIL_TO_PASS and PASS_TO_PASS test passes.
            let reward = if live.task.is_some() {
                if verdict.passed { 1.0 } else { 0.0 }
            } else if total == 0 {
                0.0
            } else {
                passed as f64 / total as f64
            };
            let observation = json!({
                "outcome": verdict.outcome,
                "reward": reward,
                "passed_all": verdict.passed,
                "passed": passed,
                "total": total,
                "error": verdict.error,
            });
            // The full verdict goes to the trace (held-out tests included); the submission is
            // on disk before it is answered.
            let full: Vec<Value> = verdict
                .tests
                .iter()
                .map(|t| test_view(t, Feedback::Full))
                .collect();
            let mut traced = observation.clone();
            traced["tests"] = Value::Array(full);
            live.record("submit", json!({}), &traced, started, true)?;
            Ok((observation, true))
        });
        let reopen = |guard: &mut bool| {
            *guard = false;
            live.touch();
            owner
                .sessions
                .lock()
                .expect("sessions")
                .insert(live.id.clone(), live.clone());
        };
        match judged {
            Ok((observation, true)) => {
                if let Err(e) = finish(&live, CloseReason::Submitted) {
                    eprintln!("session {}: {}", live.id, e.message);
                }
                Ok(observation)
            }
            Ok((observation, false)) => {
                reopen(&mut guard);
                Ok(observation)
            }
            Err(e) => {
                // Nothing was judged (the server failed): the session stays open for a retry.
                reopen(&mut guard);
                Err(e)
            }
        }
    });
    task.await
        .map_err(|e| ApiError::internal(format!("the submission failed: {e}")))?
        .map(axum::Json)
}
