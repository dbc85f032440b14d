//! Docker's registry (`docker-registry serve`, the distribution registry, Debian's package) on
//! loopback, for the tests that push images and pull them by digest.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Whether `docker-registry` runs here (else a skip, or under `R2E_TEST_STRICT=1` a failure).
pub fn available() -> bool {
    super::require(
        std::process::Command::new("docker-registry")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "Docker's registry (`docker-registry`)",
        "install Debian's `docker-registry`, as `.ci/run` does",
    )
}

/// A registry on a free port of this machine's loopback, its storage in `dir` (read-only:
/// it refuses every push). Stopped when dropped.
pub struct Registry {
    child: std::process::Child,
    pub port: u16,
}

impl Registry {
    pub fn start(dir: &Path, read_only: bool) -> Registry {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("registry.yml");
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let mut f = std::fs::File::create(&config).unwrap();
        write!(
            f,
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  maintenance:\n    readonly:\n      enabled: {read_only}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("data").display()
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("registry.log")).unwrap();
        let child = std::process::Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry starts");
        let registry = Registry { child, port };
        super::cluster::wait_for(Duration::from_secs(30), "the registry", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        registry
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
