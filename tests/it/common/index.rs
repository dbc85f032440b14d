//! A package index on a loopback port, served by the test: PEP 691's JSON simple API (with PEP
//! 700's `upload-time` per file, which uv's `--exclude-newer` reads) or PEP 503's HTML (with
//! `#sha256=` fragments), whichever the client accepts, and the files themselves. Files can be
//! added while it runs, and the hash it publishes for one can be a lie.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One file the index lists.
#[derive(Clone)]
struct Listed {
    /// The project's PEP 503 name.
    project: String,
    filename: String,
    bytes: Vec<u8>,
    /// The sha256 the index publishes (the file's own unless the test says otherwise).
    published: String,
    /// RFC 3339.
    upload_time: String,
}

/// The running index; it stops answering when dropped.
pub struct Index {
    port: u16,
    files: Arc<Mutex<Vec<Listed>>>,
    requests: Arc<AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Index {
    pub fn start() -> Index {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let index = Index {
            port,
            files: Arc::default(),
            requests: Arc::default(),
            stop: Arc::default(),
        };
        let (files, requests, stop) = (
            index.files.clone(),
            index.requests.clone(),
            index.stop.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                requests.fetch_add(1, Ordering::SeqCst);
                let files = files.clone();
                std::thread::spawn(move || answer(stream, &files));
            }
        });
        index
    }

    /// The simple index's URL: `http://127.0.0.1:PORT/simple/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }

    /// How many connections it has accepted.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Lists the file at `path` under `project`, uploaded at `upload_time`, with its own hash.
    pub fn add(&self, project: &str, path: &Path, upload_time: &str) {
        let bytes = std::fs::read(path).unwrap();
        let published = r2e_pipeline::stages::pypi::sha256_hex(&bytes);
        self.add_published(project, path, upload_time, &published);
    }

    /// Lists the file at `path` with `published` as the sha256 the index publishes for it.
    pub fn add_published(&self, project: &str, path: &Path, upload_time: &str, published: &str) {
        self.files.lock().unwrap().push(Listed {
            project: r2e_core::config::normalize_project(project),
            filename: path.file_name().unwrap().to_string_lossy().into_owned(),
            bytes: std::fs::read(path).unwrap(),
            published: published.to_owned(),
            upload_time: upload_time.to_owned(),
        });
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees the flag.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Answers one request (`Connection: close`).
fn answer(stream: std::net::TcpStream, files: &Mutex<Vec<Listed>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    let mut json = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if lower.starts_with("accept:") && lower.contains("application/vnd.pypi.simple.v1+json") {
            json = true;
        }
    }
    let mut words = request.split_whitespace();
    let method = words.next().unwrap_or("GET").to_owned();
    let path = words.next().unwrap_or("/").to_owned();
    let files = files.lock().unwrap().clone();
    let (status, kind, body) = if let Some(project) = path.strip_prefix("/simple/") {
        let project = r2e_core::config::normalize_project(project.trim_end_matches('/'));
        let listed: Vec<&Listed> = files.iter().filter(|f| f.project == project).collect();
        if listed.is_empty() {
            ("404 Not Found", "text/plain", b"no such project".to_vec())
        } else if json {
            let files: Vec<serde_json::Value> = listed
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "filename": f.filename,
                        "url": format!("/files/{}", f.filename),
                        "hashes": {"sha256": f.published},
                        "upload-time": f.upload_time,
                        "size": f.bytes.len(),
                    })
                })
                .collect();
            let page = serde_json::json!({
                "meta": {"api-version": "1.1"},
                "name": project,
                "files": files,
                "versions": [],
            });
            (
                "200 OK",
                "application/vnd.pypi.simple.v1+json",
                page.to_string().into_bytes(),
            )
        } else {
            let links: String = listed
                .iter()
                .map(|f| {
                    format!(
                        "<a href=\"/files/{0}#sha256={1}\">{0}</a>\n",
                        f.filename, f.published
                    )
                })
                .collect();
            (
                "200 OK",
                "text/html",
                format!("<html><body>\n{links}</body></html>").into_bytes(),
            )
        }
    } else if let Some(name) = path.strip_prefix("/files/") {
        match files.iter().find(|f| f.filename == name) {
            Some(f) => ("200 OK", "application/octet-stream", f.bytes.clone()),
            None => ("404 Not Found", "text/plain", b"no such file".to_vec()),
        }
    } else {
        ("404 Not Found", "text/plain", b"no".to_vec())
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        let _ = stream.write_all(&body);
    }
}

/// Builds a pure-Python wheel `NAME-VERSION-py3-none-any.whl` in `dir` (with Python's zipfile):
/// a package `NAME` whose `VERSION` is the version, with `requires` as its dependencies.
pub fn wheel(dir: &Path, name: &str, version: &str, requires: &[&str]) -> std::path::PathBuf {
    let file = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    let requires: String = requires
        .iter()
        .map(|r| format!("Requires-Dist: {r}\\n"))
        .collect();
    let script = format!(
        "import zipfile\nz = zipfile.ZipFile({path:?}, 'w')\n\
         z.writestr('{name}/__init__.py', 'VERSION = {version:?}\\n')\n\
         z.writestr('{name}-{version}.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n{requires}')\n\
         z.writestr('{name}-{version}.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         z.writestr('{name}-{version}.dist-info/RECORD', '{name}/__init__.py,,\\n{name}-{version}.dist-info/METADATA,,\\n{name}-{version}.dist-info/WHEEL,,\\n{name}-{version}.dist-info/RECORD,,\\n')\n\
         z.close()\n",
        path = file.to_string_lossy(),
    );
    python(&script);
    file
}

/// Builds a source release `NAME-VERSION.tar.gz` in `dir` (with Python's tarfile): the files
/// of `spec` (as [`super::write_fixture`] reads it) under a top folder `NAME-VERSION/`.
pub fn sdist(dir: &Path, name: &str, version: &str, spec: &str) -> std::path::PathBuf {
    let top = format!("{name}-{version}");
    let tree = tempfile::tempdir().unwrap();
    super::write_fixture(&tree.path().join(&top), spec);
    let file = dir.join(format!("{top}.tar.gz"));
    let script = format!(
        "import tarfile\nwith tarfile.open({path:?}, 'w:gz') as t:\n    t.add({src:?}, arcname={top:?})\n",
        path = file.to_string_lossy(),
        src = tree.path().join(&top).to_string_lossy(),
    );
    python(&script);
    file
}

/// Runs `script` with `python3 -c`, which must succeed.
fn python(script: &str) {
    let ok = std::process::Command::new("python3")
        .args(["-c", script])
        .status()
        .unwrap();
    assert!(ok.success(), "python3 -c failed:\n{script}");
}
