//! The remote cache stores (`r2e-store`) against real servers on loopback: moto's S3 server
//! (`python3 -m pip install 'moto[server]'`) for the object stores, nginx's WebDAV module
//! (Debian's `nginx-light`) for `http://`. Each test starts its own server, killed when the test
//! ends; without the server's program a test skips (fails under `R2E_TEST_STRICT=1`, as
//! `.ci/run` sets it, which installs both).

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use r2e_core::cache::Bucket;
use r2e_core::cache::entry;
use r2e_core::cache::store::{Created, Store, Version};
use r2e_core::hash::Hash;
use r2e_store::{Options, Scheme};

use crate::common::require;

const B: Bucket = Bucket::Llm;
/// The dummy credentials the S3 server is given; none may show in a message.
const ACCESS_KEY: &str = "AKIDR2ETESTACCESS";
const SECRET_KEY: &str = "r2e-test-secret-never-shown";

/// A free port on loopback (free when this returns: the server binds it next).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    /// Its folder: configuration, logs, and for nginx the files it serves.
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Server {
    /// Waits until the server accepts connections on its port (at most 30 s), or fails with
    /// its log.
    fn wait_ready(mut self, what: &str) -> Server {
        let start = Instant::now();
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return self;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{what} exited ({status}) before listening on port {}: {}",
                    self.port,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what} is not listening on port {} after 30 s: {}",
                self.port,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Server {
    /// The folder the server keeps what it stores in (nginx's `data/`).
    pub(crate) fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The requests that changed what nginx stores so far (from its access log): `PUT`,
    /// `DELETE`, `MKCOL`, `COPY`, `MOVE`.
    pub(crate) fn writes(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                ["\"PUT ", "\"DELETE ", "\"MKCOL ", "\"COPY ", "\"MOVE "]
                    .iter()
                    .any(|m| l.contains(m))
            })
            .map(str::to_owned)
            .collect()
    }

    /// Every request nginx logged so far.
    pub(crate) fn requests(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether moto's server can run here.
pub(crate) fn have_moto() -> bool {
    require(
        Command::new("python3")
            .args(["-c", "import moto.server"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "moto's S3 server",
        "`python3 -m pip install 'moto[server]'`; `.ci/run` does",
    )
}

/// moto's S3 server on a free port, serving one request at a time
/// (`common::moto_server_args`).
fn moto() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("moto.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new("python3")
        .args(crate::common::moto_server_args("127.0.0.1", port))
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("python3 runs");
    Server {
        child,
        port,
        dir,
        log,
    }
    .wait_ready("moto's S3 server")
}

/// The settings an S3 store needs to reach the server on `port`.
fn s3_options(port: u16) -> Options {
    let settings = [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ];
    Options {
        connect_timeout: Duration::from_secs(2),
        retries: 1,
        settings: settings
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        ..Options::default()
    }
}

/// A new bucket on moto's server (moto takes an unsigned `PUT /BUCKET`), and the store of
/// `s3://BUCKET/team/cache` on it.
fn s3_store(server: &Server, bucket: &str) -> Arc<dyn Store> {
    crate::common::moto_create_bucket(&format!("127.0.0.1:{}", server.port), bucket);
    let url = r2e_store::parse(&format!("s3://{bucket}/team/cache")).unwrap();
    assert_eq!(url.scheme(), Scheme::S3);
    r2e_store::open_with(&url, &s3_options(server.port)).unwrap()
}

/// nginx, if it is here with its WebDAV module.
pub(crate) fn nginx_program() -> Option<PathBuf> {
    let found = ["nginx", "/usr/sbin/nginx"].into_iter().find_map(|p| {
        let out = Command::new(p).arg("-V").output().ok()?;
        String::from_utf8_lossy(&out.stderr)
            .contains("http_dav_module")
            .then(|| PathBuf::from(p))
    });
    require(
        found.is_some(),
        "nginx with its WebDAV module",
        "`apt-get install nginx-light`; `.ci/run` does",
    )
    .then(|| found.unwrap())
}

/// nginx serving WebDAV from a temporary folder (`data/`) on a free port, in the foreground,
/// one process (no master), its pid and logs in its folder.
pub(crate) fn nginx(program: &Path) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let prefix = dir.path();
    std::fs::create_dir_all(prefix.join("data")).unwrap();
    std::fs::create_dir_all(prefix.join("body")).unwrap();
    let log = prefix.join("error.log");
    let conf = prefix.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            r#"daemon off;
master_process off;
pid {p}/nginx.pid;
error_log {p}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log {p}/access.log;
    client_body_temp_path {p}/body;
    server {{
        listen 127.0.0.1:{port};
        root {p}/data;
        client_max_body_size 0;
        location / {{
            dav_methods PUT DELETE MKCOL COPY MOVE;
            create_full_put_path on;
            dav_access user:rw;
        }}
    }}
}}
"#,
            p = prefix.display()
        ),
    )
    .unwrap();
    let child = Command::new(program)
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(prefix)
        .arg("-e")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(prefix.join("stderr.log")).unwrap())
        .spawn()
        .expect("nginx runs");
    Server {
        child,
        port,
        dir,
        log,
    }
    .wait_ready("nginx")
}

fn dav_store(server: &Server) -> Arc<dyn Store> {
    let url = r2e_store::parse(&format!("http://127.0.0.1:{}/r2e/cache", server.port)).unwrap();
    assert_eq!(url.scheme(), Scheme::Http);
    let options = Options {
        connect_timeout: Duration::from_secs(2),
        ..Options::default()
    };
    r2e_store::open_with(&url, &options).unwrap()
}

/// The files under `dir`, by relative path.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn sealed(key: Hash, value: &str) -> Vec<u8> {
    entry::seal(&B.folder(), key, value)
}

/// The payload of `value`'s entry, as a verified read gives it back.
fn payload_of(key: Hash, value: &str) -> Vec<u8> {
    entry::unseal_bytes(&B.folder(), key, &sealed(key, value))
        .unwrap()
        .to_vec()
}

// ---------------------------------------------------------------------------
// What every store must do, run against each server
// ---------------------------------------------------------------------------

/// Entries round-trip in the real envelopes, and a read verifies them: a flipped byte or
/// another key's entry is a miss (left in place: a remote store deletes nothing) that a
/// conditional replace repairs.
fn entries_round_trip_and_verify(store: &dyn Store, url_start: &str) {
    let key = Hash::of_bytes(b"round trip");
    assert_eq!(store.get(B, key).unwrap(), None);
    assert!(!store.contains(B, key).unwrap());
    assert_eq!(store.verify(B, key).unwrap(), None);

    let bytes = sealed(key, "answer");
    store.put(B, key, &[&bytes[..10], &bytes[10..]]).unwrap();
    assert!(store.contains(B, key).unwrap());
    let got = store.get(B, key).unwrap().unwrap();
    assert_eq!(got.bytes, bytes);
    let verified = store.verify(B, key).unwrap().unwrap();
    assert_eq!(verified.payload(), payload_of(key, "answer"));
    assert_eq!(verified.version, got.version);
    let hex = key.to_hex();
    assert_eq!(
        store.describe(B, key),
        format!("{url_start}/{}/{}/{hex}", B.folder(), &hex[..2])
    );
    // A plain put replaces; the version follows the bytes.
    let again = sealed(key, "another answer");
    store.put(B, key, &[&again]).unwrap();
    let now = store.get(B, key).unwrap().unwrap();
    assert_eq!(now.bytes, again);
    assert_ne!(now.version, got.version);

    let other = Hash::of_bytes(b"another key");
    let mut flipped = again.clone();
    let at = flipped.len() - 2;
    flipped[at] ^= 0x01;
    for (what, damaged) in [
        ("a flipped byte", flipped),
        ("another key's entry", sealed(other, "another answer")),
    ] {
        store.put(B, key, &[&damaged]).unwrap();
        assert_eq!(store.verify(B, key).unwrap(), None, "{what}");
        // Not removed (no conditional delete), but repaired in place.
        let held = store.get(B, key).unwrap().unwrap();
        assert_eq!(held.bytes, damaged, "{what}");
        assert!(!store.remove(B, key, &held.version).unwrap());
        assert!(
            store.replace(B, key, &held.version, &[&again]).unwrap(),
            "{what}"
        );
        assert_eq!(
            store.verify(B, key).unwrap().unwrap().payload(),
            payload_of(key, "another answer")
        );
    }
    // `touch` is accepted (and does nothing).
    store.touch(B, key);
}

/// Two threads race a create-only write of one key: one wins, and the loser ends with the
/// winner's bytes.
fn create_only_writers_race(store: Arc<dyn Store>) {
    for round in 0..6u8 {
        let key = Hash::of_bytes(&[b'r', round]);
        let start = Arc::new(Barrier::new(2));
        let writers: Vec<_> = ["left", "right"]
            .into_iter()
            .map(|name| {
                let (store, start) = (store.clone(), start.clone());
                std::thread::spawn(move || {
                    let mine = sealed(key, name);
                    start.wait();
                    match store.put_if_absent(B, key, &[&mine]).unwrap() {
                        Created::Stored => (true, mine),
                        Created::Exists(winner) => (false, winner.bytes),
                    }
                })
            })
            .collect();
        let ends: Vec<(bool, Vec<u8>)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(
            ends.iter().filter(|(won, _)| *won).count(),
            1,
            "round {round}: one winner"
        );
        assert_eq!(
            ends[0].1, ends[1].1,
            "round {round}: both end with the same bytes"
        );
        assert_eq!(store.get(B, key).unwrap().unwrap().bytes, ends[0].1);
        // A third writer, later, loses too.
        match store
            .put_if_absent(B, key, &[&sealed(key, "late")])
            .unwrap()
        {
            Created::Exists(winner) => assert_eq!(winner.bytes, ends[0].1),
            Created::Stored => panic!("round {round}: a late create-only write won"),
        }
    }
}

/// A conditional replace needs the version a read returned.
fn replace_needs_the_version_read(store: &dyn Store) {
    let key = Hash::of_bytes(b"replace");
    let (first, second, third) = (
        sealed(key, "first"),
        sealed(key, "second"),
        sealed(key, "third"),
    );
    // Nothing stored: nothing to replace.
    assert!(
        !store
            .replace(B, key, &Version::new("none"), &[&first])
            .unwrap()
    );
    assert!(!store.contains(B, key).unwrap());
    store.put(B, key, &[&first]).unwrap();
    let seen = store.get(B, key).unwrap().unwrap().version;
    // Another writer changes it: a replace with the old version is refused.
    store.put(B, key, &[&second]).unwrap();
    assert!(!store.replace(B, key, &seen, &[&third]).unwrap());
    assert_eq!(store.get(B, key).unwrap().unwrap().bytes, second);
    // With the version it holds, it is replaced, once.
    let now = store.get(B, key).unwrap().unwrap().version;
    assert!(store.replace(B, key, &now, &[&third]).unwrap());
    assert_eq!(store.get(B, key).unwrap().unwrap().bytes, third);
    assert!(
        !store.replace(B, key, &now, &[&first]).unwrap(),
        "used once"
    );
    assert_eq!(store.get(B, key).unwrap().unwrap().bytes, third);
}

/// A blob of a few MB streams in and out (more than one part of a multipart upload).
fn blobs_stream_in_and_out(store: &dyn Store) {
    let key = Hash::of_bytes(b"blob");
    assert!(store.get_blob(Bucket::Analysis, key).unwrap().is_none());
    let blob: Vec<u8> = (0..(11u32 << 20) + 12345)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    store
        .put_blob(Bucket::Analysis, key, &mut std::io::Cursor::new(&blob))
        .unwrap();
    let mut back = Vec::new();
    store
        .get_blob(Bucket::Analysis, key)
        .unwrap()
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert!(back == blob, "{} bytes back of {}", back.len(), blob.len());
    // Replaced whole by another.
    store
        .put_blob(Bucket::Analysis, key, &mut &b"small"[..])
        .unwrap();
    let mut back = Vec::new();
    store
        .get_blob(Bucket::Analysis, key)
        .unwrap()
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, b"small");
}

/// A store whose server does not answer (a closed port) fails fast, with an environment error
/// naming the object and no credential.
fn unreachable_fails_fast(store: &dyn Store, port: u16) {
    let key = Hash::of_bytes(b"k");
    let start = Instant::now();
    let err = store.get(B, key).unwrap_err();
    let took = start.elapsed();
    let said = err.to_string();
    assert_eq!(err.exit_code(), 1, "an environment error: {said}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {said}");
    assert!(said.contains(&store.describe(B, key)), "{said}");
    assert!(
        said.contains(&port.to_string()) || said.contains("127.0.0.1"),
        "{said}"
    );
    assert!(!said.contains(SECRET_KEY), "{said}");
    for failing in [
        store.contains(B, key).map(drop),
        store.put(B, key, &[b"x"]),
        store.put_if_absent(B, key, &[b"x"]).map(drop),
        store.put_blob(B, key, &mut &b"x"[..]),
    ] {
        let err = failing.unwrap_err();
        assert_eq!(err.exit_code(), 1, "{err}");
        assert!(!err.to_string().contains(SECRET_KEY), "{err}");
    }
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------
// S3 (moto)
// ---------------------------------------------------------------------------

#[test]
fn s3_entries_round_trip_and_verify() {
    if !have_moto() {
        return;
    }
    let server = moto();
    let store = s3_store(&server, "r2e-round-trip");
    entries_round_trip_and_verify(&*store, "s3://r2e-round-trip/team/cache");
    // The listing names what was put, under the bucket's folder, with its size.
    let listing = store.list(B).unwrap();
    let hex = Hash::of_bytes(b"round trip").to_hex();
    assert_eq!(listing.items.len(), 1, "{listing:?}");
    assert_eq!(listing.items[0].name, format!("{}/{hex}", &hex[..2]));
    assert_eq!(
        listing.items[0].bytes,
        sealed(Hash::of_bytes(b"round trip"), "another answer").len() as u64
    );
    assert!(listing.items[0].used.elapsed().unwrap() < Duration::from_secs(600));
    // From a thread inside another tokio runtime, too.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let inner = store.clone();
    let found = runtime.block_on(async move { inner.contains(B, Hash::of_bytes(b"round trip")) });
    assert!(found.unwrap());
    // And the store dropped there.
    runtime.block_on(async move { drop(store) });
}

#[test]
fn s3_create_only_writers_race() {
    if !have_moto() {
        return;
    }
    let server = moto();
    create_only_writers_race(s3_store(&server, "r2e-race"));
}

#[test]
fn s3_replace_needs_the_version_read() {
    if !have_moto() {
        return;
    }
    let server = moto();
    replace_needs_the_version_read(&*s3_store(&server, "r2e-replace"));
}

#[test]
fn s3_blobs_stream_in_and_out() {
    if !have_moto() {
        return;
    }
    let server = moto();
    blobs_stream_in_and_out(&*s3_store(&server, "r2e-blobs"));
}

#[test]
fn s3_unreachable_fails_fast() {
    let port = free_port();
    let url = r2e_store::parse("s3://r2e-nowhere/p").unwrap();
    let store = r2e_store::open_with(&url, &s3_options(port)).unwrap();
    unreachable_fails_fast(&*store, port);
}

// ---------------------------------------------------------------------------
// WebDAV (nginx)
// ---------------------------------------------------------------------------

#[test]
fn dav_entries_round_trip_and_verify() {
    let Some(program) = nginx_program() else {
        return;
    };
    let server = nginx(&program);
    let store = dav_store(&server);
    entries_round_trip_and_verify(
        &*store,
        &format!("http://127.0.0.1:{}/r2e/cache", server.port),
    );
    // Laid out as the local store is, under the URL's path; no temporary file left.
    let hex = Hash::of_bytes(b"round trip").to_hex();
    assert_eq!(
        files_under(&server.dir.path().join("data")),
        vec![format!("r2e/cache/{}/{}/{hex}", B.folder(), &hex[..2])]
    );
    // A WebDAV server is not listed.
    assert_eq!(store.list(B).unwrap(), Default::default());
}

#[test]
fn dav_create_only_writers_race() {
    let Some(program) = nginx_program() else {
        return;
    };
    let server = nginx(&program);
    create_only_writers_race(dav_store(&server));
    let left: Vec<String> = files_under(&server.dir.path().join("data"))
        .into_iter()
        .filter(|f| f.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn dav_replace_needs_the_version_read() {
    let Some(program) = nginx_program() else {
        return;
    };
    let server = nginx(&program);
    replace_needs_the_version_read(&*dav_store(&server));
}

#[test]
fn dav_blobs_stream_in_and_out() {
    let Some(program) = nginx_program() else {
        return;
    };
    let server = nginx(&program);
    blobs_stream_in_and_out(&*dav_store(&server));
}

#[test]
fn dav_unreachable_fails_fast() {
    let port = free_port();
    let url = r2e_store::parse(&format!("http://me:{SECRET_KEY}@127.0.0.1:{port}/r2e")).unwrap();
    let options = Options {
        connect_timeout: Duration::from_secs(2),
        ..Options::default()
    };
    let store = r2e_store::open_with(&url, &options).unwrap();
    assert!(!store.describe(B, Hash::of_bytes(b"k")).contains(SECRET_KEY));
    unreachable_fails_fast(&*store, port);
}

#[test]
fn an_unknown_scheme_is_a_usage_error() {
    let err = match r2e_store::open("ftp://host/cache") {
        Ok(_) => panic!("an ftp:// store opened"),
        Err(e) => e,
    };
    assert_eq!(err.exit_code(), 2, "{err}");
    let said = err.to_string();
    for scheme in ["s3://", "gs://", "az://", "http://", "https://"] {
        assert!(said.contains(scheme), "{said}");
    }
}

/// Two hosts race for one expired lease, 50 times over WebDAV, whose conditional replace is
/// not atomic: each time exactly one takes it over (it creates the lease's next generation,
/// create-only), and the other waits for the action's result.
#[test]
fn dav_two_hosts_race_for_an_expired_lease_and_one_wins() {
    use r2e_core::cache::remote::Remote;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let Some(program) = nginx_program() else {
        return;
    };
    let server = nginx(&program);
    let store = dav_store(&server);
    let remote = || {
        Arc::new(Remote::new(
            Arc::clone(&store),
            "http://dav",
            Duration::from_secs(60),
        ))
    };
    let (dead, a, b) = (remote(), remote(), remote());
    for round in 0..50u32 {
        let key = Hash::of_bytes(format!("action {round}").as_bytes());
        // A holder that ended without a result: its lease is there, expired.
        drop(
            dead.lease(Bucket::Envs, key, &|| false)
                .expect("the first lease"),
        );
        let done = Arc::new(AtomicBool::new(false));
        let winners = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(2));
        let end = Arc::new(Barrier::new(2));
        let racers: Vec<_> = [&a, &b]
            .into_iter()
            .map(|r| {
                let (r, done, winners) = (Arc::clone(r), Arc::clone(&done), Arc::clone(&winners));
                let (start, end) = (Arc::clone(&start), Arc::clone(&end));
                std::thread::spawn(move || {
                    start.wait();
                    let guard = r.lease(Bucket::Envs, key, &|| done.load(Ordering::SeqCst));
                    if guard.is_some() {
                        winners.fetch_add(1, Ordering::SeqCst);
                        // Its result is stored: the other host, waiting, finds it.
                        done.store(true, Ordering::SeqCst);
                    }
                    // The winner holds its lease until both are done.
                    end.wait();
                    drop(guard);
                })
            })
            .collect();
        for r in racers {
            r.join().unwrap();
        }
        assert_eq!(winners.load(Ordering::SeqCst), 1, "round {round}");
    }
}
