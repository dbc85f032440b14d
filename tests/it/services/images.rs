//! The Docker backend's base image between hosts (`image_share`): two hosts with their own
//! daemons (the machine's, and a second `dockerd` in its own network namespace with its own
//! data) and their own local caches share a remote store (`file://`). The second host builds no
//! base image: it loads the first one's archive (or, with `[sandbox] registry`, pulls it by
//! digest from a registry on loopback), and both give the same dataset version. A damaged
//! archive is named, is a miss (the image is built), and is repaired.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common;
use crate::docker::{SmallDaemon, TEXT_PY};

/// A host's folder under `w`: the repository and a pipeline with the docker backend and the
/// remote store `store` (`extra`: more of `[sandbox]`); its cache and output inside it.
fn host(w: &Path, name: &str, store: &Path, extra: &str) -> PathBuf {
    let dir = w.join(name);
    common::write_fixture(
        &dir.join("repo"),
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
    );
    std::fs::write(
        dir.join("pipeline.toml"),
        format!(
            "[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n\n\
             [env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\n{extra}\n\
             [cache]\nremote = \"file://{}\"\n",
            store.display()
        ),
    )
    .unwrap();
    dir
}

/// `r2e build --json` in `dir` against the daemon `daemon` (`DOCKER_HOST`; the machine's with
/// `None`), offline, with timings: it must succeed. Its dataset version, what it said, and how
/// long it took.
fn build(dir: &Path, daemon: Option<&str>) -> (String, String, Duration) {
    let mut command = assert_cmd::Command::cargo_bin("r2e").unwrap();
    command
        .args(["build", "--json"])
        .current_dir(dir)
        .envs(common::offline_env())
        .env("R2E_LOG", "timings")
        .env_remove("DOCKER_HOST")
        .timeout(Duration::from_secs(900));
    if let Some(daemon) = daemon {
        command.env("DOCKER_HOST", daemon);
    }
    let started = Instant::now();
    let out = command.output().unwrap();
    let took = started.elapsed();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{said}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["counts"]["instances"], 2, "{summary}\n{said}");
    let version = summary["dataset_version"].as_str().unwrap().to_owned();
    // What the build said of the base image, and its timings, for the test's log.
    for line in said.lines().filter(|l| l.contains("base image")) {
        eprintln!("  {}: {line}", dir.file_name().unwrap().to_string_lossy());
    }
    (version, said, took)
}

/// The base image's tag for the pipeline in `dir` on the machine's daemon (`r2e image base`:
/// it has the image by then).
fn base_tag(dir: &Path) -> String {
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["image", "base"])
        .current_dir(dir)
        .envs(common::offline_env())
        .env_remove("DOCKER_HOST")
        .timeout(Duration::from_secs(600))
        .assert()
        .success()
        .get_output()
        .clone();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The events of `dir`'s build traces on the base image (`images-v1`), in order.
fn image_events(dir: &Path) -> Vec<String> {
    let mut events = Vec::new();
    for e in std::fs::read_dir(dir.join(".out.r2e/shards"))
        .unwrap()
        .flatten()
    {
        if !e.file_name().to_string_lossy().ends_with(".trace.jsonl") {
            continue;
        }
        for line in common::jsonl(&e.path()) {
            if line["bucket"] == "images-v1" {
                events.push(line["event"].as_str().unwrap().to_owned());
            }
        }
    }
    events
}

/// The remote store at `store`, as r2e opens a `file://` one.
fn remote(store: &Path) -> r2e_core::cache::remote::Remote {
    r2e_core::cache::remote::Remote::new(
        Arc::new(r2e_core::cache::LocalStore::new(store)),
        "file://store",
        Duration::from_secs(60),
    )
}

/// The image ID of `tag` on the second daemon.
fn id_on(daemon: &SmallDaemon, tag: &str) -> String {
    daemon
        .docker(&["image", "inspect", "--format", "{{.Id}}", tag])
        .unwrap_or_else(|| panic!("the second daemon has no image {tag}"))
        .trim()
        .to_owned()
}

/// Whether this machine can start a second daemon: root (its mounts and namespaces), `unshare`
/// and `ip`.
fn second_daemon_possible() -> bool {
    let found = |p: &str| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {p} || test -x /usr/sbin/{p}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    common::docker().is_some()
        && common::require(
            common::is_root() && found("unshare") && found("ip") && found("dockerd"),
            "root, `unshare`, `ip` and `dockerd`, to start a second Docker daemon in a network namespace of its own",
            "run the tests as root where Docker Engine and iproute2 are installed, as `.ci/run` does",
        )
}

#[test]
fn a_second_host_loads_the_first_ones_base_image_and_a_damaged_archive_is_rebuilt_and_repaired() {
    if !second_daemon_possible() {
        return;
    }
    let w = tempfile::tempdir().unwrap();
    let store = w.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let (a, b, c) = (
        host(w.path(), "a", &store, ""),
        host(w.path(), "b", &store, ""),
        host(w.path(), "c", &store, ""),
    );

    // Host A, the machine's daemon: it builds the base image (or has it) and stores its archive.
    let (v, said_a, took_a) = build(&a, None);
    let tag = base_tag(&a);
    let events_a = image_events(&a);
    assert!(
        events_a.contains(&"stored".to_owned()),
        "{events_a:?}\n{said_a}"
    );
    let stored = r2e_exec::image_share::verify(&remote(&store), &tag, None).unwrap();
    assert_eq!(stored.tag, tag);
    assert_eq!(stored.pushed, None);
    let daemon = r2e_exec::sandbox::docker::connect().unwrap();
    let (id_a, size) = r2e_exec::sandbox::docker::image_id(&daemon, &tag).unwrap();
    assert_eq!(stored.id, id_a, "the entry records the image's ID");
    let entry = r2e_core::cache::LocalStore::new(&store).path(
        r2e_core::cache::Bucket::Images,
        r2e_exec::image_share::key(&tag, None),
    );
    let archive = std::fs::metadata(&entry).unwrap().len();
    eprintln!(
        "host A: {:.1}s; image {tag} of {size} bytes, its archive {archive} bytes",
        took_a.as_secs_f64()
    );

    // Host B, a daemon of its own and a cache of its own: it loads A's image, builds none.
    let second = SmallDaemon::on_disk();
    let (v_b, said_b, took_b) = build(&b, Some(&second.host()));
    eprintln!("host B: {:.1}s", took_b.as_secs_f64());
    assert_eq!(v_b, v, "the same dataset version on both hosts");
    assert!(
        said_b.contains(&format!(
            "loaded the base image {tag} from the remote cache (its archive)"
        )),
        "{said_b}"
    );
    assert!(!said_b.contains("built the base image"), "{said_b}");
    assert_eq!(image_events(&b), ["hit"], "{said_b}");
    assert_eq!(id_on(&second, &tag), id_a, "B runs A's very image");

    // The archive damaged in the store (one byte of its payload flipped) and B's image gone:
    // a third local cache on B names the damage, builds the image, and repairs the entry.
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&entry, &bytes).unwrap();
    drop(bytes);
    second.docker(&["rmi", "--force", &tag]).unwrap();
    let (v_c, said_c, took_c) = build(&c, Some(&second.host()));
    eprintln!("host B again, a fresh cache: {:.1}s", took_c.as_secs_f64());
    assert_eq!(v_c, v, "{said_c}");
    let damaged = said_c
        .lines()
        .find(|l| l.contains("is damaged"))
        .unwrap_or_else(|| panic!("the damage is not named: {said_c}"));
    assert!(
        damaged.contains("images-v1/") && damaged.contains("do not match its checksum"),
        "{damaged}"
    );
    assert!(
        said_c.contains(&format!("built the base image {tag}")),
        "{said_c}"
    );
    assert_eq!(
        image_events(&c),
        ["damaged", "started", "stored"],
        "{said_c}"
    );
    let repaired = r2e_exec::image_share::verify(&remote(&store), &tag, None)
        .unwrap_or_else(|why| panic!("the entry is not repaired: {why}"));
    assert_eq!(repaired.id, id_on(&second, &tag), "it holds B's new image");

    // An entry whose checksums hold but whose image is not the one it records (another ID in
    // its header, sealed anew): loaded, found out, removed, and a miss: the image is made.
    let key = r2e_exec::image_share::key(&tag, None);
    let bytes = std::fs::read(&entry).unwrap();
    let head_len = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let lying = r2e_exec::image_share::Header {
        id: format!("sha256:{}", "0".repeat(64)),
        ..repaired
    };
    let sealed = r2e_core::cache::entry::seal("images-v1/archive", key, &lying);
    let mut forged = bytes[..8].to_vec();
    forged.extend_from_slice(&(sealed.len() as u32).to_le_bytes());
    forged.extend_from_slice(&sealed);
    forged.extend_from_slice(&bytes[12 + head_len..]);
    std::fs::write(&entry, forged).unwrap();
    second.docker(&["rmi", "--force", &tag]).unwrap();
    let trace = w.path().join("share.trace.jsonl");
    let share = r2e_exec::image_share::Share {
        remote: Arc::new(
            remote(&store).with_trace(r2e_core::cache::remote::Trace::create(&trace).unwrap()),
        ),
        registry: None,
        scratch: w.path().join("scratch"),
    };
    let made = std::sync::atomic::AtomicU32::new(0);
    let got = share.obtain(
        &r2e_exec::sandbox::docker::connect_to(&second.host()).unwrap(),
        &tag,
        &|| {
            made.fetch_add(1, Ordering::Relaxed);
            Err(r2e_core::error::Error::env("not made in this test"))
        },
    );
    assert!(got.is_err_and(|e| e.to_string().contains("not made in this test")));
    assert_eq!(made.load(Ordering::Relaxed), 1, "the image is made instead");
    let events: Vec<String> = common::jsonl(&trace)
        .iter()
        .map(|l| l["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["damaged", "started"]);
    assert!(
        second.docker(&["image", "inspect", &tag]).is_none(),
        "the image of another ID is not kept under the tag"
    );
    assert_eq!(
        std::fs::read_dir(w.path().join("scratch")).unwrap().count(),
        0,
        "the unpacked archive is removed"
    );
}

/// Forwards `127.0.0.1:PORT` in the network namespace `netns` to `127.0.0.1:PORT` of this
/// process's own, until dropped: how a daemon in a namespace of its own reaches a registry on
/// the machine's loopback, which it takes for an insecure (plain HTTP) registry, as the
/// machine's daemon does.
struct Forward {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Forward {
    fn start(netns: &Path, port: u16) -> Forward {
        use std::os::fd::AsRawFd;
        let home = std::fs::File::open("/proc/thread-self/ns/net").unwrap();
        let there = std::fs::File::open(netns).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // The listener is made in the daemon's namespace, by this thread alone, which then
            // returns to its own: the connections it opens are this process's.
            // SAFETY: setns on this thread with namespace files this function opened.
            assert_eq!(
                unsafe { libc::setns(there.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            let listener = std::net::TcpListener::bind(("127.0.0.1", port));
            // SAFETY: as above, back to the namespace the thread started in.
            assert_eq!(
                unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            let listener = listener.unwrap();
            listener.set_nonblocking(true).unwrap();
            ready_tx.send(()).unwrap();
            while !stopping.load(Ordering::Relaxed) {
                let Ok((inside, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                inside.set_nonblocking(false).unwrap();
                let Ok(outside) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (inside.try_clone().unwrap(), outside.try_clone().unwrap()),
                    (outside, inside),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        ready.recv().unwrap();
        Forward {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn with_a_registry_the_second_host_pulls_the_first_ones_base_image_by_digest() {
    if !second_daemon_possible() || !common::registry::available() {
        return;
    }
    let w = tempfile::tempdir().unwrap();
    let registry = common::registry::Registry::start(w.path(), false);
    let name = format!("127.0.0.1:{}/r2e-test", registry.port);
    let store = w.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let extra = format!("registry = \"{name}\"\n");
    let (a, b) = (
        host(w.path(), "a", &store, &extra),
        host(w.path(), "b", &store, &extra),
    );

    // Host A pushes the base image (built, or its daemon's) and records its digest.
    let (v, said_a, took_a) = build(&a, None);
    let tag = base_tag(&a);
    assert!(image_events(&a).contains(&"stored".to_owned()), "{said_a}");
    let stored = r2e_exec::image_share::verify(&remote(&store), &tag, Some(&name)).unwrap();
    let pushed = stored
        .pushed
        .clone()
        .expect("the entry names the pushed image");
    assert!(
        pushed.starts_with(&format!("{name}/r2e-base@sha256:")),
        "{pushed}"
    );
    assert_eq!(
        stored.payload_len, 0,
        "the image is in the registry, not the store"
    );
    let daemon = r2e_exec::sandbox::docker::connect().unwrap();
    let (id_a, _) = r2e_exec::sandbox::docker::image_id(&daemon, &tag).unwrap();
    assert_eq!(stored.id, id_a);
    eprintln!("host A (push): {:.1}s", took_a.as_secs_f64());

    // Host B, in its own namespace, reaches the registry at the same address and pulls by
    // digest: no image built, the same ID, the same dataset version.
    let second = SmallDaemon::on_disk();
    let _forward = Forward::start(&second.netns(), registry.port);
    let (v_b, said_b, took_b) = build(&b, Some(&second.host()));
    eprintln!("host B (pull): {:.1}s", took_b.as_secs_f64());
    assert_eq!(v_b, v);
    assert!(
        said_b.contains(&format!(
            "loaded the base image {tag} from the remote cache (pulled `{pushed}`)"
        )),
        "{said_b}"
    );
    assert!(!said_b.contains("built the base image"), "{said_b}");
    assert_eq!(image_events(&b), ["hit"], "{said_b}");
    assert_eq!(id_on(&second, &tag), id_a);
    // The machine's daemon keeps the base image, without the registry's name.
    let short = tag.rsplit(':').next().unwrap();
    let _ = r2e_exec::sandbox::docker::remove_image(&daemon, &format!("{name}/r2e-base:{short}"));
}
